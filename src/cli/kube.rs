//! `rpcmeter kube --shards N run RUN-ARGS...`: the Kubernetes manifest of one run spread over
//! N pods: an Indexed Job whose pod I runs `rpcmeter run RUN-ARGS --shard I/N` (Kubernetes
//! puts the index in $(JOB_COMPLETION_INDEX)), all starting on one instant, each printing
//! its result as JSON; `kubectl logs ... | rpcmeter merge -` gives the one exact result.
//! Kubernetes runs the pods; rpcmeter has no coordinator of its own.
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(clap::Args, Debug)]
pub struct KubeArgs {
    /// Pods, each running its share of the load
    #[arg(long, value_parser = crate::app::parse::shard_count)]
    pub shards: u32,
    /// Container image with rpcmeter as entrypoint (built from the repository's Dockerfile)
    #[arg(long, default_value = "rpcmeter:latest")]
    pub image: String,
    /// Name of the Job (its pods are labelled job-name=NAME)
    #[arg(long, default_value = "rpcmeter")]
    pub name: String,
    /// Start the load this long after printing: time to apply the manifest and start the pods
    #[arg(long, value_parser = crate::app::parse::positive_duration, default_value = "2m")]
    pub start_in: Duration,
    /// `run` and its flags, meaning the whole load (as for `run --shard`)
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub run: Vec<String>,
}

pub fn main(args: KubeArgs) -> anyhow::Result<ExitCode> {
    use crate::error::bad_input;
    // The run's flags are checked here, once, as a pod would read them.
    let parsed = super::run::nested("kube", &args.run, &[])?;
    let run_args = &args.run[1..];
    if parsed.shard.is_some() || parsed.shards.is_some() || parsed.start_at.is_some() {
        return Err(bad_input("kube run: --shard, --shards and --start-at are set by kube itself"));
    }
    let start = (SystemTime::now() + args.start_in).duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    // Metadata naming a credential goes into a Secret that the pods read through the
    // environment (Kubernetes expands $(VAR) in args): the Job, which anyone who may list
    // pods reads, carries no credential, and the pods still send the real metadata.
    let redactor = crate::app::redact::Redactor::new(&parsed.redact);
    let secret_name = format!("{}-metadata", args.name);
    let mut secret_data = serde_json::Map::new();
    let mut env = Vec::new();
    let mut secret_keys = Vec::new();
    let mut container_args: Vec<String> = vec!["run".into()];
    container_args.extend(run_args.iter().cloned());
    let flags = [
        ("metadata", "RPCMETER_METADATA", &parsed.metadata),
        ("reflect-metadata", "RPCMETER_REFLECT_METADATA", &parsed.reflect_metadata),
    ];
    for (key, var, json) in flags {
        let Some(json) = json.as_ref() else { continue };
        let names = redactor.secret_names(json);
        if names.is_empty() {
            continue;
        }
        secret_keys.extend(names);
        for word in container_args.iter_mut() {
            *word = word.replace(json.as_str(), &format!("$({var})"));
        }
        secret_data.insert(key.into(), json.clone().into());
        env.push(json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}));
    }
    container_args.extend(
        [
            "--shard",
            &format!("$(JOB_COMPLETION_INDEX)/{}", args.shards),
            "--start-at",
            &format!("{start:.3}"),
            "--format",
            "json",
            "-q",
            "--no-calibrate",
        ]
        .map(String::from),
    );
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": args.name, "labels": {"app.kubernetes.io/name": "rpcmeter"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": args.shards,
            "parallelism": args.shards,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "rpcmeter"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "rpcmeter",
                        "image": args.image,
                        "args": container_args,
                    }],
                },
            },
        },
    });
    if !env.is_empty() {
        job["spec"]["template"]["spec"]["containers"][0]["env"] = env.into();
    }
    let manifest = match secret_data.is_empty() {
        true => job,
        false => {
            let secret = json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name, "labels": {"app.kubernetes.io/name": "rpcmeter"}},
                "type": "Opaque",
                "stringData": secret_data,
            });
            eprintln!(
                "# the metadata with {} is in Secret {secret_name}, not in the Job's args: keep this manifest private",
                secret_keys.join(", ")
            );
            json!({"apiVersion": "v1", "kind": "List", "items": [secret, job]})
        }
    };
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    let how = format!(
        "# kubectl apply -f - ; the load starts at {} (Unix {start:.3}), in {} from now.\n\
         # then: kubectl wait --for=condition=complete job/{name} --timeout=1h && \
         kubectl logs -l job-name={name} --tail=-1 | rpcmeter merge -\n",
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs_f64(start)),
        humantime::format_duration(args.start_in),
        name = args.name
    );
    eprint!("{how}");
    std::io::stdout()
        .write_all((text + "\n").as_bytes())
        .map_err(|e| crate::error::output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}
