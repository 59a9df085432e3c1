//! `rpcmeter kube --simulate FILE`: the pods of a printed manifest, run on this machine as
//! the kubelet would run them, so that a manifest is checked before a cluster: each
//! volume's ConfigMap or Secret files written under a temporary directory standing in for
//! its mount path, the env (Secret values included) and $(JOB_COMPLETION_INDEX) expanded in
//! the args, the pods' logs merged as `kubectl logs ... | rpcmeter merge -` would.
use crate::error::bad_input;
use base64::Engine;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long after the simulation starts the pods start their load: the printed start is
/// for the cluster (minutes away, or already past).
const START_IN: Duration = Duration::from_secs(2);

pub fn main(file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let text =
        crate::input::read_string(file, crate::input::Kind::Result, &format!("kube --simulate {}", file.display()))?;
    let manifest: Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "kube --simulate {}: not a JSON manifest ({e}); print it with kube --output json",
            file.display()
        ))
    })?;
    let objects = match manifest["kind"].as_str() {
        Some("List") => manifest["items"].as_array().cloned().unwrap_or_default(),
        _ => vec![manifest],
    };
    let named = |kind: &str, name: &str| objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    let job = objects
        .iter()
        .find(|o| o["kind"] == "Job")
        .ok_or_else(|| bad_input(format!("kube --simulate {}: no Job in it", file.display())))?;
    let pods = job["spec"]["completions"].as_u64().unwrap_or(1);
    let pod = &job["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let root = tempfile::tempdir().map_err(|e| bad_input(format!("kube --simulate: no temporary directory: {e}")))?;

    // Volumes: each item's bytes at the mount path, under the temporary directory.
    let mut mounts: Vec<(String, String)> = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let (Some(name), Some(at)) = (mount["name"].as_str(), mount["mountPath"].as_str()) else { continue };
        let volume = pod["volumes"].as_array().into_iter().flatten().find(|v| v["name"] == name);
        let Some(volume) = volume else { continue };
        let (source, object) = match (&volume["configMap"], &volume["secret"]) {
            (Value::Object(_), _) => {
                (&volume["configMap"], named("ConfigMap", volume["configMap"]["name"].as_str().unwrap_or("")))
            }
            (_, Value::Object(_)) => {
                (&volume["secret"], named("Secret", volume["secret"]["secretName"].as_str().unwrap_or("")))
            }
            _ => continue,
        };
        let object = object
            .ok_or_else(|| bad_input(format!("kube --simulate: volume {name}: its object is not in the manifest")))?;
        let here = root.path().join(at.trim_start_matches('/'));
        for item in source["items"].as_array().into_iter().flatten() {
            let (Some(key), Some(path)) = (item["key"].as_str(), item["path"].as_str()) else { continue };
            let bytes = value_of(object, key)
                .ok_or_else(|| bad_input(format!("kube --simulate: volume {name}: no key {key}")))?;
            let file = here.join(path);
            let written =
                std::fs::create_dir_all(file.parent().unwrap_or(&here)).and_then(|_| std::fs::write(&file, bytes));
            written.map_err(|e| bad_input(format!("kube --simulate: {}: {e}", file.display())))?;
        }
        mounts.push((at.to_owned(), here.to_string_lossy().into_owned()));
    }
    // The env, as Kubernetes gives it (values from Secrets included).
    let mut env: HashMap<String, String> = HashMap::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let Some(name) = var["name"].as_str() else { continue };
        let value = match (&var["value"], &var["valueFrom"]["secretKeyRef"]) {
            (Value::String(v), _) => v.clone(),
            (_, Value::Object(r)) => {
                let secret = named("Secret", r.get("name").and_then(Value::as_str).unwrap_or(""));
                let key = r.get("key").and_then(Value::as_str).unwrap_or("");
                let bytes = secret.and_then(|s| value_of(s, key));
                String::from_utf8(
                    bytes.ok_or_else(|| bad_input(format!("kube --simulate: env {name}: no such Secret key")))?,
                )
                .map_err(|_| bad_input(format!("kube --simulate: env {name}: not UTF-8")))?
            }
            _ => continue,
        };
        env.insert(name.to_owned(), value);
    }
    let words: Vec<String> =
        container["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    let start =
        format!("{:.3}", (SystemTime::now() + START_IN).duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64());
    let exe = std::env::current_exe().map_err(|e| bad_input(format!("kube --simulate: {e}")))?;
    let mut children = Vec::new();
    for i in 0..pods {
        let mut env = env.clone();
        env.insert("JOB_COMPLETION_INDEX".into(), i.to_string());
        let mut args = Vec::new();
        for (n, word) in words.iter().enumerate() {
            let mut word = expand(word, &env);
            if n > 0 && words[n - 1] == "--start-at" {
                word = start.clone();
            }
            for (at, here) in &mounts {
                word = word.replace(at.as_str(), here);
            }
            args.push(word);
        }
        let child = Command::new(&exe).args(&args).envs(&env).stdout(Stdio::piped()).spawn();
        children.push(child.map_err(|e| bad_input(format!("kube --simulate: pod {i}: {e}")))?);
    }
    let mut logs = Vec::new();
    let mut failed = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().map_err(|e| bad_input(format!("kube --simulate: pod {i}: {e}")))?;
        if !out.status.success() {
            failed
                .push(format!("pod {i} exited {}", out.status.code().map_or("by a signal".into(), |c| c.to_string())));
        }
        logs.extend(out.stdout);
    }
    if !failed.is_empty() {
        // As the cluster would: one failed shard fails the Job.
        eprintln!("rpcmeter: error: kube --simulate: the Job failed: {}", failed.join(", "));
        return Ok(ExitCode::from(1));
    }
    let mut merge = Command::new(&exe)
        .args(["merge", "-", "--format", if json { "json" } else { "table" }])
        .stdin(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = merge.stdin.take() {
        std::io::Write::write_all(&mut stdin, &logs)?;
    }
    let status = merge.wait()?;
    Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
}

/// A key's bytes in a ConfigMap (`data`, `binaryData`) or a Secret (`stringData`, `data`).
fn value_of(object: &Value, key: &str) -> Option<Vec<u8>> {
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok();
    match object["kind"].as_str()? {
        "ConfigMap" => {
            object["data"][key].as_str().map(|s| s.as_bytes().to_vec()).or_else(|| b64(&object["binaryData"][key]))
        }
        _ => object["stringData"][key].as_str().map(|s| s.as_bytes().to_vec()).or_else(|| b64(&object["data"][key])),
    }
}

/// `$(VAR)` replaced by its value, as Kubernetes expands args (an unknown one stays).
fn expand(word: &str, env: &HashMap<String, String>) -> String {
    let mut out = word.to_owned();
    for (name, value) in env {
        out = out.replace(&format!("$({name})"), value);
    }
    out
}
