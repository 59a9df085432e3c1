//! `rpcmeter kube --simulate FILE`: the pods of a printed manifest, run on this machine as
//! the kubelet would run them, so that a manifest is checked before a cluster: each
//! volume's ConfigMap or Secret files written under a temporary directory standing in for
//! its mount path, the env (Secret values included) and $(JOB_COMPLETION_INDEX) expanded in
//! the args, pod 0's name under the Service (`--coordinator NAME-0.SERVICE:PORT`) resolved to
//! 127.0.0.1 at a free port, the pods started a moment apart as a cluster would start them
//! (pod 0 last: the others wait for it); what pod 0 prints (the merged result) is printed.
use crate::error::bad_input;
use base64::Engine;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Between two pods' starts, so that their joins are spread as on a cluster.
const POD_GAP: Duration = Duration::from_millis(500);
/// After pod 0 has ended, how long the other pods have to end before they are stopped (they
/// end once pod 0 has confirmed their results, or give up on it).
const OTHERS_WAIT: Duration = Duration::from_secs(10);

/// `run` is the command whose flags the pods' words hold (to find their `--format`).
pub fn main(file: &Path, json: bool, run: &clap::Command) -> anyhow::Result<ExitCode> {
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
    let mut words: Vec<String> =
        container["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    // The Service's DNS name for pod 0 is this machine, at a port free here.
    let at = words.iter().position(|w| w == "--coordinator").map(|i| i + 1).filter(|&i| i < words.len());
    let at = at.ok_or_else(|| {
        bad_input(format!(
            "kube --simulate {}: the pods have no --coordinator: print it again with this rpcmeter",
            file.display()
        ))
    })?;
    words[at] = format!("127.0.0.1:{}", free_port()?);
    if json {
        // Pod 0's result as JSON, whatever --format the run was given.
        words = with_format_json(run, &words);
    }
    let exe = std::env::current_exe().map_err(|e| bad_input(format!("kube --simulate: {e}")))?;
    let mut children = Vec::new();
    for i in (0..pods).rev() {
        let mut env = env.clone();
        env.insert("JOB_COMPLETION_INDEX".into(), i.to_string());
        let mut args = Vec::new();
        for word in &words {
            let mut word = expand(word, &env);
            for (at, here) in &mounts {
                word = word.replace(at.as_str(), here);
            }
            args.push(word);
        }
        if i + 1 < pods {
            std::thread::sleep(POD_GAP);
        }
        // Pod 0's log is the answer: its stdout and stderr go through. The others' say one
        // line each (or their own result when pod 0 could not take it): kept for a failure.
        let mut command = Command::new(&exe);
        command.args(&args).envs(&env);
        if i > 0 {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let child = command.spawn().map_err(|e| bad_input(format!("kube --simulate: pod {i}: {e}")))?;
        children.push((i, child));
    }
    let (_, pod0) = children.pop().expect("pod 0 was started");
    let status = pod0.wait_with_output().map_err(|e| bad_input(format!("kube --simulate: pod 0: {e}")))?.status;
    let code = |s: std::process::ExitStatus| s.code().map_or("by a signal".to_owned(), |c| c.to_string());
    let mut failed = Vec::new();
    let until = Instant::now() + OTHERS_WAIT;
    for (i, mut child) in children.into_iter().rev() {
        while child.try_wait()?.is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait()?.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            for line in said.lines() {
                eprintln!("pod {i}: {line}");
            }
            failed.push(format!("pod {i} exited {}", code(out.status)));
        }
    }
    if !status.success() {
        return Ok(ExitCode::from(status.code().unwrap_or(1) as u8));
    }
    if !failed.is_empty() {
        // As the cluster would: one failed shard fails the Job, whatever pod 0 printed.
        eprintln!("rpcmeter: error: kube --simulate: the Job failed: {}", failed.join(", "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A port that nothing on 127.0.0.1 listens on now (the simulated pod 0 takes it).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| bad_input(format!("kube --simulate: no free local port: {e}")))?;
    Ok(listener.local_addr().map_err(|e| bad_input(format!("kube --simulate: {e}")))?.port())
}

/// `run ...` args with their --format (a long flag only) taken out and `--format json` added
/// (given twice, a pod would refuse its args).
fn with_format_json(command: &clap::Command, words: &[String]) -> Vec<String> {
    let Some((run, rest)) = words.split_first() else { return words.to_vec() };
    let format: Vec<_> = super::words::flags(command, rest).into_iter().filter(|f| f.id == "format").collect();
    let mut out = vec![run.clone()];
    out.extend(
        rest.iter()
            .enumerate()
            .filter(|(i, _)| !format.iter().any(|f| (f.first..f.last).contains(i)))
            .map(|(_, w)| w.clone()),
    );
    out.extend(["--format".to_owned(), "json".to_owned()]);
    out
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
