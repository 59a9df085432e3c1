//! `rpcmeter kube --shards N run RUN-ARGS...`: the Kubernetes manifest of one run spread over
//! N pods: an Indexed Job whose pod I runs `rpcmeter run RUN-ARGS --shard I/N --coordinator
//! NAME-0.NAME:PORT` (Kubernetes puts the index in $(JOB_COMPLETION_INDEX)). A headless
//! Service gives pod 0 that DNS name (the pods' `subdomain`); pod 0 listens there, releases
//! every shard together once all have joined, merges their results and prints the one exact
//! answer: `kubectl logs` of pod 0 holds it.
//! The local files the run reads travel in a ConfigMap (a Secret for the client's key), and
//! every shard's flags are checked here, so that a run that cannot work is refused before
//! it reaches a cluster.
use super::words::Becomes;
use crate::error::bad_input;
use crate::kube::{self as k, Files};
use crate::report::Format;
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct KubeArgs {
    /// Pods, each running its share of the load
    #[arg(long, value_parser = crate::cli::parse::shard_count, required_unless_present = "simulate")]
    pub shards: Option<u32>,
    /// Run the pods of a manifest printed by kube (YAML or JSON) on this machine, as the
    /// kubelet would (files where the volumes put them, under a private temporary directory,
    /// $(VARS) expanded, the Service's name for pod 0 resolved to 127.0.0.1, the pods started a
    /// moment apart, killed with it), and print what `kubectl logs` of pod 0 would: the merged
    /// result. Only what kube prints is run: anything else is refused
    #[arg(long, value_name = "FILE", conflicts_with = "shards")]
    pub simulate: Option<std::path::PathBuf>,
    /// Container image with rpcmeter as entrypoint, pinned (built from the repository's
    /// Dockerfile) [default: rpcmeter:VERSION, this rpcmeter's version]
    #[arg(long)]
    pub image: Option<String>,
    /// Name of the Job (a Kubernetes name; its pods are labelled job-name=NAME)
    #[arg(long, default_value = "rpcmeter")]
    pub name: String,
    /// How long the pods wait for all of them to join pod 0 (scheduling, image pulls) before
    /// giving up; the load starts once all have joined
    #[arg(long, value_parser = crate::cli::parse::positive_duration, default_value = "5m")]
    pub join_timeout: Duration,
    /// The port pod 0 listens on for the others (the Service's port)
    #[arg(long, default_value_t = 7450, value_parser = clap::value_parser!(u16).range(1..))]
    pub coordinator_port: u16,
    /// CPU of each pod, requested and its limit (equal: Guaranteed QoS, so a shard is neither
    /// starved nor evicted first)
    #[arg(long, value_parser = k::quantity, default_value = "1")]
    pub cpu: String,
    /// Memory of each pod, requested and its limit
    #[arg(long, value_parser = k::quantity, default_value = "512Mi")]
    pub memory: String,
    /// Spread of the pods over nodes: preferred (one per node when the scheduler can, never
    /// blocking the start) or required (never more than one above the least loaded node)
    #[arg(long, value_enum, default_value_t = Spread::Preferred)]
    pub spread: Spread,
    /// The Job's deadline (activeDeadlineSeconds) [default: twice --join-timeout (pods may
    /// start that late, then wait that long for the last), the run's warm-up, length, drain
    /// and connect timeout, plus 1 min]
    #[arg(long, value_parser = crate::cli::parse::positive_duration)]
    pub timeout: Option<Duration>,
    /// How long the finished Job and its pods (and their logs) are kept (ttlSecondsAfterFinished)
    #[arg(long, value_parser = crate::cli::parse::positive_duration, default_value = "1h")]
    pub ttl: Duration,
    /// The manifest as multi-document YAML, or as one JSON object (a List when several);
    /// with --simulate, json has pod 0 print the merged result as JSON whatever its --format
    #[arg(long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
    /// `run` and its flags, meaning the whole load (as for `run --shard`)
    #[arg(required_unless_present = "simulate", trailing_var_arg = true, allow_hyphen_values = true)]
    pub run: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Spread {
    Preferred,
    Required,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

/// What becomes of each flag (by clap id) of the run in the pods' args.
type Rewrites = Vec<(&'static str, Becomes)>;

pub fn main(args: KubeArgs) -> anyhow::Result<ExitCode> {
    if let Some(file) = &args.simulate {
        return simulate(file, args.output == Output::Json);
    }
    let run = validate(&args)?;
    let shipped = ship(&args, &run)?;
    let objects = build(&args, &run, &shipped);
    print(&args, &run, &shipped, objects)
}

/// The run, checked as its pods will read it.
struct Checked {
    parsed: super::run::RunArgs,
    shards: u32,
    image: String,
    /// Pod 0's name under the Service, with the port: where every pod meets.
    coordinator: String,
    /// --join-timeout as the pods' args say it.
    join_timeout: String,
    /// The Job's activeDeadlineSeconds.
    deadline: Duration,
}

/// Everything refused before printing: what would fail on the cluster, or be lost there.
fn validate(args: &KubeArgs) -> anyhow::Result<Checked> {
    let shards = args.shards.unwrap_or(1);
    // The run's flags are checked here, once, as a pod would read them.
    let parsed = super::run::nested("kube", &args.run, &[])?;
    let run_words = &args.run[1..];
    if parsed.shard.is_some() || parsed.shards.is_some() || parsed.start_at.is_some() || parsed.coordinator.is_some() {
        return Err(bad_input("kube run: --shard, --shards, --start-at and --coordinator are set by kube itself"));
    }
    // Given twice (here and by kube), a pod would refuse its args.
    if super::words::flags(&run_command(), run_words).iter().any(|f| f.id == "join_timeout") {
        return Err(bad_input("kube run: --join-timeout is kube's own flag here: kube --join-timeout D ... run ..."));
    }
    k::check_name(&args.name, shards)?;
    let image = args.image.clone().unwrap_or_else(|| format!("rpcmeter:{}", env!("CARGO_PKG_VERSION")));
    k::check_image(&image)?;
    if let Some(flag) = written_file(&parsed) {
        return Err(bad_input(format!(
            "kube run: {flag} would be written inside a pod and lost with it; pod 0 prints the merged result in its log (`kubectl logs ... > FILE` keeps it; with --format json, the whole JSON result)"
        )));
    }
    // The answer is pod 0's merge of the pods' results, printed as a table or JSON.
    if !matches!(parsed.format, Format::Table | Format::Json) {
        return Err(bad_input(format!(
            "kube run: --format {}: pod 0 prints the shards' merged result, as table or json",
            format_name(parsed.format)
        )));
    }
    if parsed.metrics_addr.is_some_and(|a| a.port() == 0) {
        return Err(bad_input("kube run: --metrics-addr needs a fixed port, the pods' containerPort for a scraper"));
    }
    if parsed.metrics_addr.is_some_and(|a| a.port() == args.coordinator_port) {
        return Err(bad_input(format!(
            "kube run: --metrics-addr uses port {}, the coordinator's: give kube another --coordinator-port",
            args.coordinator_port
        )));
    }
    parsed.input.apply();
    // Pod 0's name under the Service (its hostname is NAME-0 in an Indexed Job): the address
    // every pod meets at; pod 0 listens at its address once its DNS record exists.
    let coordinator = format!("{}-0.{}:{}", args.name, args.name, args.coordinator_port);
    let join_timeout = humantime::format_duration(args.join_timeout).to_string().replace(' ', "");
    // Refused unread: each shard's settings read the log whole.
    if let Some(log) = &parsed.replay.replay {
        shippable_log(log)?;
    }
    let length = each_shard(args, shards, &coordinator, &join_timeout)?;
    let deadline = match (args.timeout, length) {
        (Some(t), _) => t,
        // The first pod starts within a minute of the Job (scheduling, image pull), pod 0
        // within --join-timeout of it (else that pod gives up), the last within --join-timeout
        // of pod 0; then the run. Pod 0 reports before the Job's deadline in every case.
        (None, Some(run)) => 2 * args.join_timeout + run + Duration::from_secs(60),
        (None, None) => {
            return Err(bad_input(
                "kube: the run's length is not known from its flags (-n or --loop without -z): give --timeout, the Job's deadline",
            ))
        }
    };
    Ok(Checked { parsed, shards, image, coordinator, join_timeout, deadline })
}

/// Every shard's flags checked as its pod will read them: a shard with no worker or no
/// call of its own is refused now, not as one failed pod on the cluster. Returns the run's
/// length (warm-up, -z, drain, connect timeout) when its flags tell it.
fn each_shard(args: &KubeArgs, shards: u32, coordinator: &str, join_timeout: &str) -> anyhow::Result<Option<Duration>> {
    let (mut length, mut scanned) = (None, None);
    for i in 0..shards {
        let extra = ["--shard", &format!("{i}/{shards}"), "--coordinator", coordinator, "--join-timeout", join_timeout]
            .map(String::from);
        let shard = super::run::nested("kube", &args.run, &extra)?;
        // A --replay log is read whole by the first shard's settings; the others take its scan.
        let settings = shard
            .settings_scanned(vec![], scanned.clone())
            .map_err(|e| bad_input(format!("kube --shards {shards}: {e}")))?;
        scanned = settings.replay.as_ref().map(|log| log.scan.clone());
        let plan = &settings.plan;
        let run = match plan.stop.duration {
            Some(d) => Some(d),
            None => replay_length(settings.replay.as_ref()),
        };
        length = run.map(|d| plan.warmup + d + plan.drain + plan.target.connect_timeout);
    }
    Ok(length)
}

/// What goes with the manifest: the files the run reads, the credentials, the pods' args.
struct Shipped {
    /// For the ConfigMap, mounted at `k::FILES_DIR`.
    files: Files,
    /// The client's certificate and key, for a Secret mounted at `k::TLS_DIR`.
    tls: Files,
    /// `-m`/`--reflect-metadata` naming a credential: the Secret's `stringData`, the env
    /// reading it, the names of the credentials.
    secret_data: serde_json::Map<String, serde_json::Value>,
    env: Vec<serde_json::Value>,
    secret_keys: Vec<String>,
    /// The run's secret, in a Secret of its own read through the env.
    coordinator_secret: String,
    /// The container's args and ports.
    args: Vec<String>,
    ports: Vec<serde_json::Value>,
}

/// The files the run reads, shipped and mounted, each flag naming one rewritten; the
/// credentials moved into a Secret; kube's own flags added.
fn ship(args: &KubeArgs, run: &Checked) -> anyhow::Result<Shipped> {
    let parsed = &run.parsed;
    let run_words = &args.run[1..];
    let (files, tls, mut becomes) = ship_files(parsed)?;
    // A flag naming a local file that is not shipped would name nothing in a pod.
    if let Some(flag) = path_flags(run_words).into_iter().find(|f| !becomes.iter().any(|(b, _)| *b == f.id)) {
        let paths = flag.paths.join(",");
        return Err(bad_input(format!("kube run: {} {paths}: kube does not ship this file to the pods", flag.long)));
    }
    files.check("ConfigMap")?;
    tls.check("Secret")?;
    // Pod 0 prints the merged result in the run's --format; the others one line on stderr.
    for id in ["quiet", "no_calibrate", "no_save"] {
        becomes.push((id, Becomes::Dropped));
    }
    let mut ports = vec![json!({"name": "coordinator", "containerPort": args.coordinator_port, "protocol": "TCP"})];
    if let Some(addr) = parsed.metrics_addr {
        // Listening on the pod's every address, so a scraper reaches it through the port.
        becomes
            .push(("metrics_addr", Becomes::Words(vec!["--metrics-addr".into(), format!("0.0.0.0:{}", addr.port())])));
        ports.push(json!({"name": "metrics", "containerPort": addr.port(), "protocol": "TCP"}));
    }
    let mut container_args: Vec<String> = vec!["run".into()];
    container_args.extend(rewrite(run_words, &becomes));

    // Metadata naming a credential goes into a Secret that the pods read through the
    // environment (Kubernetes expands $(VAR) in args): the Job, which anyone who may list
    // pods reads, carries no credential, and the pods still send the real metadata.
    let redactor = crate::app::redact::Redactor::new(&parsed.redact);
    let secret_name = format!("{}-metadata", args.name);
    let (mut secret_data, mut env, mut secret_keys) = (serde_json::Map::new(), Vec::new(), Vec::new());
    let flags = [
        ("metadata", k::METADATA_ENV, &parsed.calls.metadata),
        ("reflect-metadata", k::REFLECT_METADATA_ENV, &parsed.calls.reflect_metadata),
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
    // The run's secret, which every shard proves to pod 0: only this Job's pods join it.
    let (_, coordinator_secret) = crate::app::coordinator::trust::Secret::generate()?;
    let key = json!({"name": format!("{}-coordinator", args.name), "key": "secret"});
    env.push(json!({"name": k::SECRET_ENV, "valueFrom": {"secretKeyRef": key}}));
    let shard = format!("$(JOB_COMPLETION_INDEX)/{}", run.shards);
    let own = ["--shard", &shard, "--coordinator", &run.coordinator, "--join-timeout", &run.join_timeout];
    container_args.extend(own.into_iter().chain(["-q", "--no-calibrate", "--no-save"]).map(String::from));
    Ok(Shipped { files, tls, secret_data, env, secret_keys, coordinator_secret, args: container_args, ports })
}

/// The local files `parsed` reads, in the ConfigMap's and the TLS Secret's files, and what
/// becomes of each flag naming one.
fn ship_files(parsed: &super::run::RunArgs) -> anyhow::Result<(Files, Files, Rewrites)> {
    let mut files = Files::default();
    let mut tls = Files::default();
    let mut becomes: Rewrites = Vec::new();
    let at = |dir: &str, path: &str| format!("{dir}/{path}");
    if let Some(proto) = &parsed.calls.schema.proto {
        let found = k::proto_files(proto, &parsed.calls.schema.import_paths)?;
        let dir = |i: usize| format!("include-{i}");
        for (i, name, bytes) in found.files {
            files.add(&format!("{}/{name}", dir(i)), bytes);
        }
        let used: std::collections::BTreeSet<usize> = files
            .entries
            .iter()
            .filter_map(|(_, p, _)| p.strip_prefix("include-")?.split('/').next()?.parse().ok())
            .collect();
        let includes: Vec<String> = used.iter().map(|&i| at(k::FILES_DIR, &dir(i))).collect();
        let main = at(k::FILES_DIR, &format!("{}/{}", dir(found.main.0), found.main.1));
        // The include directories in the order they had here, so that every name resolves
        // as it did (the file's own directory, last, included).
        becomes
            .push(("proto", Becomes::Words(vec!["--proto".into(), main, "--import-paths".into(), includes.join(",")])));
        becomes.push(("import_paths", Becomes::Dropped));
    }
    let read = |path: &std::path::Path, kind, flag: &str| {
        crate::input::read(path, kind, &format!("{flag} {}", path.display()))
    };
    if let Some(set) = &parsed.calls.schema.protoset {
        let bytes = read(set, crate::input::Kind::Proto, "--protoset")?;
        let path = files.add(&format!("protoset/{}", k::base_name(set, "protoset.pb")), bytes);
        becomes.push(("protoset", Becomes::Words(vec!["--protoset".into(), at(k::FILES_DIR, &path)])));
    }
    if let Some(data) = &parsed.data_file {
        // `-D -`: standard input, read now (a pod has none).
        let bytes = read(data, crate::input::Kind::RequestData, "-D")?;
        let path = files.add(&format!("data/{}", k::base_name(data, "stdin.json")), bytes);
        becomes.push(("data_file", Becomes::Words(vec!["--data-file".into(), at(k::FILES_DIR, &path)])));
    }
    if let Some(log) = &parsed.replay.replay {
        let path = files.add(&format!("replay/{}", k::base_name(log, "replay.binlog")), replay_log(log)?);
        becomes.push(("replay", Becomes::Words(vec!["--replay".into(), at(k::FILES_DIR, &path)])));
    }
    if let Some(workload) = &parsed.workload {
        let path = ship_workload(workload, &mut files)?;
        becomes.push(("workload", Becomes::Words(vec!["--workload".into(), at(k::FILES_DIR, &path)])));
    }
    if let Some(ca) = &parsed.calls.tls.cacert {
        let bytes = read(ca, crate::input::Kind::Proto, "--cacert")?;
        let path = files.add(&format!("ca/{}", k::base_name(ca, "ca.pem")), bytes);
        becomes.push(("cacert", Becomes::Words(vec!["--cacert".into(), at(k::FILES_DIR, &path)])));
    }
    if let (Some(cert), Some(key)) = (&parsed.calls.tls.cert, &parsed.calls.tls.key) {
        let cert = tls.add("tls.crt", read(cert, crate::input::Kind::Proto, "--cert")?);
        let key = tls.add("tls.key", read(key, crate::input::Kind::Proto, "--key")?);
        becomes.push(("cert", Becomes::Words(vec!["--cert".into(), at(k::TLS_DIR, &cert)])));
        becomes.push(("key", Becomes::Words(vec!["--key".into(), at(k::TLS_DIR, &key)])));
    }
    Ok((files, tls, becomes))
}

/// The manifest's objects: the ConfigMap and Secrets (when there are files or
/// credentials), the headless Service, the Indexed Job.
fn build(args: &KubeArgs, run: &Checked, shipped: &Shipped) -> Vec<serde_json::Value> {
    let labels = json!({"app.kubernetes.io/name": "rpcmeter", "app.kubernetes.io/instance": args.name});
    let Carried { mut objects, volumes, mounts } = carried(args, shipped, &labels);
    objects.push(service(args, &labels));
    let pod = pod_spec(args, run, shipped, volumes, mounts, &labels);
    objects.push(job(args, run, pod, &labels));
    objects
}

/// An object's metadata: its name and the run's labels.
fn meta(name: &str, labels: &serde_json::Value) -> serde_json::Value {
    json!({"name": name, "labels": labels})
}

/// What carries the shipped files and secrets to the pods: the objects holding them, and the
/// pods' volumes and mounts of them.
struct Carried {
    objects: Vec<serde_json::Value>,
    volumes: Vec<serde_json::Value>,
    mounts: Vec<serde_json::Value>,
}

/// The ConfigMap of files, the Secret of TLS files (each mounted when there are any), the
/// Secret of metadata credentials and the coordinator's Secret.
fn carried(args: &KubeArgs, shipped: &Shipped, labels: &serde_json::Value) -> Carried {
    let mut carried = Carried { objects: Vec::new(), volumes: Vec::new(), mounts: Vec::new() };
    if !shipped.files.entries.is_empty() {
        let name = format!("{}-files", args.name);
        let (data, binary) = shipped.files.data();
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(&name, labels)});
        if !data.is_empty() {
            cm["data"] = data.into();
        }
        if !binary.is_empty() {
            cm["binaryData"] = binary.into();
        }
        carried.objects.push(cm);
        carried.volumes.push(json!({"name": "files", "configMap": {"name": name, "items": shipped.files.items()}}));
        carried.mounts.push(json!({"name": "files", "mountPath": k::FILES_DIR, "readOnly": true}));
    }
    if !shipped.tls.entries.is_empty() {
        let name = format!("{}-tls", args.name);
        let (data, binary) = shipped.tls.data();
        // A Secret's `data` is base64; text goes in `stringData`.
        let mut secret =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(&name, labels), "type": "Opaque"});
        if !binary.is_empty() {
            secret["data"] = binary.into();
        }
        if !data.is_empty() {
            secret["stringData"] = data.into();
        }
        carried.objects.push(secret);
        // 0440 with the pod's fsGroup: readable by the non-root user, by no one else.
        let items = shipped.tls.items();
        let volume = json!({"name": "tls", "secret": {"secretName": name, "items": items, "defaultMode": 0o440}});
        carried.volumes.push(volume);
        carried.mounts.push(json!({"name": "tls", "mountPath": k::TLS_DIR, "readOnly": true}));
    }
    let secret = |name: String, data: serde_json::Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(&name, labels), "type": "Opaque", "stringData": data});
    if !shipped.secret_data.is_empty() {
        carried.objects.push(secret(format!("{}-metadata", args.name), json!(shipped.secret_data)));
    }
    let data = json!({"secret": shipped.coordinator_secret});
    carried.objects.push(secret(format!("{}-coordinator", args.name), data));
    carried
}

/// The headless Service, publishing pods before they are ready: pod 0's DNS name exists as
/// soon as it has an address, which is when the others look for it.
fn service(args: &KubeArgs, labels: &serde_json::Value) -> serde_json::Value {
    let port = args.coordinator_port;
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(&args.name, labels),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": labels,
            "ports": [{"name": "coordinator", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    })
}

/// The Indexed Job: one pod per shard, `pod` their spec.
fn job(args: &KubeArgs, run: &Checked, pod: serde_json::Value, labels: &serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(&args.name, labels),
        "spec": {
            "completionMode": "Indexed",
            "completions": run.shards,
            "parallelism": run.shards,
            // A failed index is never retried (a retried shard could not rejoin a run under
            // way), and fails no other: pod 0 outlives a failed shard, reports the partial
            // merge naming it and exits 1, so its log stays until the TTL. A podFailurePolicy
            // failing the Job on any shard's exit deleted pod 0 within a second, its answer
            // unread. The Job fails once every index has ended, any of them failed.
            "backoffLimitPerIndex": 0,
            "activeDeadlineSeconds": run.deadline.as_secs().max(1),
            "ttlSecondsAfterFinished": args.ttl.as_secs(),
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    })
}

/// The pods' spec: one container running the shipped args, non-root as the "restricted"
/// Pod Security Standard asks, spread over nodes.
fn pod_spec(
    args: &KubeArgs,
    run: &Checked,
    shipped: &Shipped,
    volumes: Vec<serde_json::Value>,
    mounts: Vec<serde_json::Value>,
    labels: &serde_json::Value,
) -> serde_json::Value {
    let resources = json!({"cpu": args.cpu, "memory": args.memory});
    let mut container = json!({
        "name": "rpcmeter",
        "image": run.image,
        "imagePullPolicy": "IfNotPresent",
        "args": shipped.args,
        "resources": {"requests": resources, "limits": resources},
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        // A failed pod's last log lines (at most 80 lines, 2 KiB: pod 0's partial merge and
        // why) kept in its status, readable from the API server even once the node is gone.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    if !shipped.env.is_empty() {
        container["env"] = shipped.env.clone().into();
    }
    if !mounts.is_empty() {
        container["volumeMounts"] = mounts.into();
    }
    container["ports"] = shipped.ports.clone().into();
    let mut pod = json!({
        "restartPolicy": "Never",
        // NAME-I.NAME: each pod's DNS name under the Service, pod 0's the coordinator's.
        "subdomain": args.name,
        // rpcmeter never calls the Kubernetes API: no token in the pods to steal.
        "automountServiceAccountToken": false,
        // The Dockerfile's user; runAsNonRoot as the "restricted" Pod Security Standard asks.
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        // Shards on one node would share its network and kernel: one per node when possible.
        "topologySpreadConstraints": [{
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": match args.spread { Spread::Preferred => "ScheduleAnyway", Spread::Required => "DoNotSchedule" },
            "labelSelector": {"matchLabels": labels},
        }],
        "containers": [container],
    });
    if !volumes.is_empty() {
        pod["volumes"] = volumes.into();
    }
    pod
}

/// The manifest on stdout, and on stderr the commands that follow.
fn print(
    args: &KubeArgs,
    run: &Checked,
    shipped: &Shipped,
    mut objects: Vec<serde_json::Value>,
) -> anyhow::Result<ExitCode> {
    let text = match args.output {
        Output::Yaml => objects.iter().map(k::yaml::document).collect::<Vec<_>>().join("---\n"),
        Output::Json => {
            let one = match objects.len() {
                1 => objects.pop().unwrap_or_default(),
                _ => json!({"apiVersion": "v1", "kind": "List", "items": objects}),
            };
            serde_json::to_string_pretty(&one).unwrap_or_default() + "\n"
        }
    };
    let mut secrets = vec!["the run's coordinator secret".to_owned()];
    if !shipped.tls.entries.is_empty() {
        secrets.push("the client key".into());
    }
    if !shipped.secret_keys.is_empty() {
        secrets.push(format!("the metadata with {}", shipped.secret_keys.join(", ")));
    }
    let are = match secrets.len() {
        1 => "is in a Secret",
        _ => "are in Secrets",
    };
    eprintln!("# {} {are}, not in the Job's args: keep this manifest private", secrets.join(", "));
    let merge_format = match run.parsed.format {
        Format::Table => String::new(),
        other => format!(" as {}", format_name(other)),
    };
    let (name, shards, join_timeout) = (&args.name, run.shards, &run.join_timeout);
    // Server-side: a client-side apply keeps the whole object in an annotation limited to
    // 256 KiB, and fails on a ConfigMap past about 255 KiB (docs/kube.md).
    eprint!(
        "# kubectl apply --server-side -f FILE\n\
         # kubectl logs -f -l job-name={name},batch.kubernetes.io/job-completion-index=0 --tail=-1\n\
         # pod 0's log holds the merged result{merge_format} (once it runs: kubectl get pods -l job-name={name}).\n\
         # The load starts when all {shards} pods have joined pod 0, within {join_timeout} of its start;\n\
         # a failed shard is reported by pod 0 (partial merge, exit 1), and the Job fails after {}s at the latest: see kubectl describe job/{name}\n",
        run.deadline.as_secs().max(1),
    );
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| crate::error::output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}

/// `--replay` FILE's bytes, for the ConfigMap: a log over what one object holds is refused
/// unread, saying how to replay it instead (every shard reads the whole log).
fn replay_log(log: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let label = shippable_log(log)?;
    crate::input::read(log, crate::input::Kind::RequestData, &label)
}

/// Refuses a `--replay` log kube cannot ship; else the label of its errors.
fn shippable_log(log: &std::path::Path) -> anyhow::Result<String> {
    let label = format!("kube run: --replay {}", log.display());
    let size = std::fs::metadata(log).map_err(|e| bad_input(format!("{label}: cannot read: {e}")))?.len();
    if !std::fs::metadata(log).is_ok_and(|m| m.is_file()) || size > k::OBJECT_LIMIT.0 {
        return Err(bad_input(format!(
            "{label}: {} is more than the {} a ConfigMap holds (or not a regular file): replay a bigger log with run --shards N, or --coordinator and --shard I/N on machines that each hold a copy (docs/replay.md)",
            crate::input::ByteSize(size),
            k::OBJECT_LIMIT
        )));
    }
    Ok(label)
}

/// How long a replay on the log's own schedule lasts (its span / --speed), when it ends with
/// the log (no -z, no --replay-loop).
fn replay_length(replay: Option<&crate::replay::source::Log>) -> Option<Duration> {
    let log = replay.filter(|log| !log.settings.repeat)?;
    Some(log.scan.info.span().div_f64(log.settings.speed?))
}

/// Ships `--workload` FILE and every `data_file` it names into `files`: the workload under
/// `workload/`, each data file below it in `data/I-NAME` (for its call I), its `data_file`
/// keys rewritten to those paths. Returns the workload's path under the mount.
fn ship_workload(workload: &std::path::Path, files: &mut Files) -> anyhow::Result<String> {
    let label = format!("kube run: --workload {}", workload.display());
    // Checked as a pod will read it; its data files as it resolves them.
    let read = crate::load::workload::read(workload)?;
    let text = crate::input::read_string(workload, crate::input::Kind::RequestData, &label)?;
    let mut table: toml::Table = text.parse().map_err(|e| bad_input(format!("{label}: {e}")))?;
    let calls = table.get_mut("call").and_then(|c| c.as_array_mut());
    for (i, (entry, call)) in calls.into_iter().flatten().zip(&read.calls).enumerate() {
        let crate::schema::DataSource::File(path) = &call.data else { continue };
        let name = format!("data/{i}-{}", k::base_name(path, "data.json"));
        let bytes = crate::input::read(path, crate::input::Kind::RequestData, &format!("{label}: {}", path.display()))?;
        files.add(&format!("workload/{name}"), bytes);
        if let Some(entry) = entry.as_table_mut() {
            entry.insert("data_file".into(), name.into());
        }
    }
    let rewritten = toml::to_string(&table).map_err(|e| bad_input(format!("{label}: {e}")))?;
    Ok(files.add(&format!("workload/{}", k::base_name(workload, "workload.toml")), rewritten.into_bytes()))
}

/// A flag of a `run` whose value names local paths (a PathBuf, as clap reads it).
struct PathFlag {
    /// Its clap id.
    id: String,
    /// `--long`.
    long: String,
    /// The paths it names (one, or a list split at its delimiter, as `-i a,b`).
    paths: Vec<String>,
    delimiter: Option<char>,
}

/// The flags of `words` (a `run`'s, after `run`) naming local paths, in order.
fn path_flags(words: &[String]) -> Vec<PathFlag> {
    let command = run_command();
    let mut found = Vec::new();
    for flag in super::words::flags(&command, words) {
        let Some(arg) = command.get_arguments().find(|a| a.get_id() == flag.id.as_str()) else { continue };
        if arg.get_value_parser().type_id() != std::any::TypeId::of::<std::path::PathBuf>() {
            continue;
        }
        let value = flag.value.unwrap_or_default();
        let delimiter = arg.get_value_delimiter();
        let paths = match delimiter {
            Some(d) => value.split(d).map(String::from).collect(),
            None => vec![value],
        };
        let long = format!("--{}", arg.get_long().unwrap_or(flag.id.as_str()));
        found.push(PathFlag { id: flag.id, long, paths, delimiter });
    }
    found
}

/// The first flag of `parsed` that writes a file (a pod's files die with it; in `--simulate`,
/// a manifest would write where it likes).
fn written_file(parsed: &super::run::RunArgs) -> Option<&'static str> {
    let written = [
        (parsed.output.is_some(), "-o/--output"),
        (!parsed.export.is_empty(), "--export"),
        (parsed.csv_details.is_some(), "--csv-details"),
        (parsed.hdr_log.is_some(), "--hdr-log"),
        (parsed.history.is_some(), "--history"),
    ];
    written.iter().find(|(given, _)| *given).map(|(_, flag)| *flag)
}

/// `kube --simulate FILE`: the manifest's pods, checked to be what `kube` prints (the
/// structure by kube/simulate.rs, the args here, where `run`'s flags are known), run here.
fn simulate(file: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let label = format!("kube --simulate {}", file.display());
    let pods = k::simulate::read(file)?;
    let root = tempfile::tempdir().map_err(|e| bad_input(format!("{label}: no temporary directory: {e}")))?;
    let port = k::simulate::free_port()?;
    let mut all = Vec::new();
    for i in 0..pods.count {
        let words = pods.args_of(i);
        let here =
            pod_words(&words, root.path(), port, json).map_err(|e| bad_input(format!("{label}: pod {i}: {e}")))?;
        all.push(here);
    }
    // Nothing is written before every pod's args are known to be kube's.
    pods.write(root.path())?;
    for (i, words) in all.iter().enumerate() {
        workload_files_inside(words, root.path()).map_err(|e| bad_input(format!("{label}: pod {i}: {e}")))?;
    }
    k::simulate::run(&all, &pods.env)
}

/// A pod's args (`run ...`, expanded), checked to be what `kube` prints, made to run here:
/// every local path under a mount `kube` makes, moved below `root`; the coordinator at
/// 127.0.0.1:`port`; --metrics-addr on any free local port (two pods on one machine);
/// `--format json` when `json`.
fn pod_words(words: &[String], root: &std::path::Path, port: u16, json: bool) -> Result<Vec<String>, String> {
    if words.first().map(String::as_str) != Some("run") {
        return Err(format!("the container runs {:?}: kube prints `run` and its flags", words.first()));
    }
    let parsed = super::run::nested("kube --simulate", words, &[]).map_err(|e| format!("{e:#}"))?;
    if let Some(flag) = written_file(&parsed) {
        return Err(format!("{flag}: kube never prints a flag writing a file"));
    }
    let kubes = parsed.shard.is_some() && parsed.coordinator.is_some();
    if !kubes || parsed.join.is_some() || parsed.start_at.is_some() || parsed.shards.is_some() {
        return Err("the args are not kube's: --shard and --coordinator, no --join, --start-at or --shards".into());
    }
    let rest = &words[1..];
    // Every flag naming a local path names a mounted file, and is moved below `root`.
    let mut becomes: Vec<(String, Becomes)> = Vec::new();
    for flag in path_flags(rest) {
        let mut here = Vec::new();
        for path in &flag.paths {
            let at = k::MOUNTS.join(", ");
            here.push(mounted(path, root).ok_or(format!("{} {path}: not a file kube mounts (under {at})", flag.long))?);
        }
        let words = match flag.delimiter {
            Some(d) => vec![flag.long.clone(), here.join(&d.to_string())],
            None => here.into_iter().flat_map(|v| [flag.long.clone(), v]).collect(),
        };
        // A flag given twice (`-i a -i b`): both occurrences' paths, at the first.
        match becomes.iter_mut().find(|(id, _)| *id == flag.id) {
            Some((_, Becomes::Words(all))) => all.extend(words),
            _ => becomes.push((flag.id, Becomes::Words(words))),
        }
    }
    becomes.push(("coordinator".into(), Becomes::Words(vec!["--coordinator".into(), format!("127.0.0.1:{port}")])));
    becomes.push(("metrics_addr".into(), Becomes::Words(vec!["--metrics-addr".into(), "127.0.0.1:0".into()])));
    if json {
        becomes.push(("format".into(), Becomes::Dropped));
    }
    let mut out = vec!["run".to_owned()];
    out.extend(rewrite(rest, &becomes));
    if json {
        // Pod 0's result as JSON, whatever --format the run was given.
        out.extend(["--format".to_owned(), "json".to_owned()]);
    }
    Ok(out)
}

/// `path` in a pod, when it is below a mount `kube` makes: where it is below `root`.
fn mounted(path: &str, root: &std::path::Path) -> Option<String> {
    k::MOUNTS.iter().find_map(|m| {
        let rest = k::simulate::relative(path.strip_prefix(m)?.strip_prefix('/')?)?;
        Some(root.join(m.trim_start_matches('/')).join(rest).to_string_lossy().into_owned())
    })
}

/// The data files a pod's `--workload` names (relative to it) are below `root` too.
fn workload_files_inside(words: &[String], root: &std::path::Path) -> Result<(), String> {
    let parsed = super::run::nested("kube --simulate", words, &[]).map_err(|e| format!("{e:#}"))?;
    let Some(file) = parsed.workload else { return Ok(()) };
    let workload = crate::load::workload::read(&file).map_err(|e| format!("{e:#}"))?;
    for call in workload.calls {
        if let crate::schema::DataSource::File(path) = call.data {
            let inside = path
                .strip_prefix(root)
                .is_ok_and(|rest| rest.components().all(|c| matches!(c, std::path::Component::Normal(_))));
            if !inside {
                return Err(format!("--workload: data_file {}: not a file kube ships beside it", path.display()));
            }
        }
    }
    Ok(())
}

fn format_name(format: Format) -> String {
    clap::ValueEnum::to_possible_value(&format).map_or_else(String::new, |v| v.get_name().to_owned())
}

/// `words` (a `run`'s, after `run`) with the flags in `becomes` replaced or taken out.
fn rewrite(words: &[String], becomes: &[(impl AsRef<str>, Becomes)]) -> Vec<String> {
    super::words::rewrite(&run_command(), words, becomes)
}

fn run_command() -> clap::Command {
    super::run::command()
}
