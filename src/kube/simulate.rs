//! `rpcmeter kube --simulate FILE`: the pods of a printed manifest, run on this machine as
//! the kubelet would run them, so that a manifest is checked before a cluster: each
//! volume's ConfigMap or Secret files written under a private temporary directory standing
//! in for its mount path, the env (Secret values) and $(JOB_COMPLETION_INDEX) expanded in the
//! args, the pods started a moment apart as a cluster would start them (pod 0 last: the
//! others wait for it); what pod 0 prints (the merged result) is printed.
//!
//! A manifest is a program that runs here, so only what `kube` prints is run: one container
//! whose args are rpcmeter's own (checked by cli/kube.rs, which knows `run`'s flags), the env
//! vars `kube` sets ([`super::ENV`], from the manifest's Secrets), files only under the mounts
//! `kube` makes. Anything else is refused in one line before a file is written. The pods
//! die with the simulation, however it ends.
use crate::error::bad_input;
use base64::Engine;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Between two pods' starts, so that their joins are spread as on a cluster.
const POD_GAP: Duration = Duration::from_millis(500);
/// After pod 0 has ended, how long the other pods have to end before they are stopped (they
/// end once pod 0 has confirmed their results, or give up on it).
const OTHERS_WAIT: Duration = Duration::from_secs(10);

/// A manifest's pods, checked: what `kube` prints and nothing else.
pub struct Pods {
    pub count: u32,
    /// The container's args, $(VARS) not expanded.
    pub args: Vec<String>,
    /// The env vars, from `super::ENV` only, with their values from the manifest's Secrets.
    pub env: Vec<(String, String)>,
    /// The volumes' files: the path in the pod (a mount of `super::MOUNTS`, then the item's
    /// relative path) and the bytes.
    files: Vec<(PathBuf, Vec<u8>)>,
}

/// Reads and checks `file`, YAML (as `kube` prints by default) or JSON (`--output json`).
pub fn read(file: &Path) -> anyhow::Result<Pods> {
    let label = format!("kube --simulate {}", file.display());
    let text = crate::input::read_string(file, crate::input::Kind::Result, &label)?;
    let objects = objects(&text).map_err(|e| bad_input(format!("{label}: {e}")))?;
    pods(&objects).map_err(|e| bad_input(format!("{label}: {e}")))
}

/// The manifest's objects: a JSON object (a List's items), or YAML documents.
fn objects(text: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    if text.trim_start().starts_with('{') {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not a JSON manifest: {e}"))?;
        objects.push(v);
    } else {
        use serde::Deserialize;
        for document in serde_norway::Deserializer::from_str(text) {
            let v = Value::deserialize(document).map_err(|e| format!("not a YAML manifest: {e}"))?;
            if !v.is_null() {
                objects.push(v);
            }
        }
    }
    let mut all = Vec::new();
    for o in objects {
        match o["kind"].as_str() {
            Some("List") => all.extend(o["items"].as_array().cloned().unwrap_or_default()),
            _ => all.push(o),
        }
    }
    Ok(all)
}

/// The kinds `kube` prints.
const KINDS: [&str; 4] = ["ConfigMap", "Secret", "Service", "Job"];

fn pods(objects: &[Value]) -> Result<Pods, String> {
    if let Some(other) = objects.iter().find(|o| !KINDS.contains(&o["kind"].as_str().unwrap_or(""))) {
        return Err(format!("a {} object: kube prints only {}", other["kind"], KINDS.join(", ")));
    }
    let jobs: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Job").collect();
    let [job] = jobs[..] else { return Err(format!("{} Jobs: kube prints one", jobs.len())) };
    let count = job["spec"]["completions"].as_u64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0);
    let count = count.ok_or("the Job has no completions")?;
    let pod = &job["spec"]["template"]["spec"];
    for field in ["initContainers", "ephemeralContainers"] {
        if !pod[field].is_null() {
            return Err(format!("the pods have {field}: kube prints one container"));
        }
    }
    let containers = pod["containers"].as_array().map_or(0, Vec::len);
    if containers != 1 {
        return Err(format!("the pods have {containers} containers: kube prints one"));
    }
    let container = &pod["containers"][0];
    // The image's entrypoint is rpcmeter: a command of the manifest's own would be run here.
    for field in ["command", "envFrom", "workingDir"] {
        if !container[field].is_null() {
            return Err(format!("the container has a {field}: kube prints none, only rpcmeter's args"));
        }
    }
    let args: Vec<String> = container["args"]
        .as_array()
        .ok_or("the container has no args")?
        .iter()
        .map(|a| a.as_str().map(String::from).ok_or("an arg that is not a string"))
        .collect::<Result<_, _>>()?;
    Ok(Pods { count, args, env: env_of(objects, container)?, files: files_of(objects, pod, container)? })
}

/// The object of `kind` named `name` in the manifest.
fn named<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> Result<&'a Value, String> {
    let name = name.unwrap_or("");
    objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).ok_or(format!("no {kind} {name:?}"))
}

/// The container's env: only `super::ENV`, each from a key of a Secret in the manifest.
fn env_of(objects: &[Value], container: &Value) -> Result<Vec<(String, String)>, String> {
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or("");
        if !super::ENV.contains(&name) {
            return Err(format!("env {name:?}: kube sets only {}", super::ENV.join(", ")));
        }
        let from = &var["valueFrom"]["secretKeyRef"];
        if !var["value"].is_null() || !from.is_object() {
            return Err(format!("env {name}: kube sets it from a Secret's key, nothing else"));
        }
        let secret = named(objects, "Secret", from["name"].as_str())?;
        let key = from["key"].as_str().unwrap_or("");
        let bytes = value_of(secret, key).ok_or(format!("env {name}: no key {key:?} in its Secret"))?;
        env.push((name.to_owned(), String::from_utf8(bytes).map_err(|_| format!("env {name}: not UTF-8"))?));
    }
    Ok(env)
}

/// The volumes' files: only at the mounts `kube` makes, each item below its mount.
fn files_of(objects: &[Value], pod: &Value, container: &Value) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let mut files = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let (name, at) = (mount["name"].as_str().unwrap_or(""), mount["mountPath"].as_str().unwrap_or(""));
        if !super::MOUNTS.contains(&at) {
            return Err(format!("volume {name} mounted at {at:?}: kube mounts only at {}", super::MOUNTS.join(", ")));
        }
        let volume = pod["volumes"].as_array().into_iter().flatten().find(|v| v["name"] == name);
        let volume = volume.ok_or(format!("volume {name}: not among the pod's volumes"))?;
        let (source, object) = match (&volume["configMap"], &volume["secret"]) {
            (Value::Object(c), _) => (&volume["configMap"], named(objects, "ConfigMap", c["name"].as_str())?),
            (_, Value::Object(s)) => (&volume["secret"], named(objects, "Secret", s["secretName"].as_str())?),
            _ => return Err(format!("volume {name}: kube mounts only a ConfigMap or a Secret")),
        };
        for item in source["items"].as_array().into_iter().flatten() {
            let key = item["key"].as_str().unwrap_or("");
            let path = item["path"].as_str().unwrap_or("");
            let relative = relative(path).ok_or(format!("volume {name}: item path {path:?} leaves its mount"))?;
            let bytes = value_of(object, key).ok_or(format!("volume {name}: no key {key:?}"))?;
            files.push((Path::new(at).join(relative), bytes));
        }
    }
    Ok(files)
}

/// `path` when it names a file below a directory: relative, with no `..`, `.` or empty part.
pub fn relative(path: &str) -> Option<&Path> {
    let p = Path::new(path);
    let normal = !path.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
    // `a//b` and `a/./b` read as normal components: refused too, as Kubernetes refuses them.
    (normal && !path.split('/').any(|part| part.is_empty() || part == ".")).then_some(p)
}

impl Pods {
    /// Pod `index`'s args as the kubelet gives them: $(JOB_COMPLETION_INDEX) and the env's
    /// $(VARS) expanded (an unknown one stays).
    pub fn args_of(&self, index: u32) -> Vec<String> {
        let index = index.to_string();
        let vars: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain([("JOB_COMPLETION_INDEX", index.as_str())])
            .collect();
        self.args
            .iter()
            .map(|word| vars.iter().fold(word.clone(), |w, (name, value)| w.replace(&format!("$({name})"), value)))
            .collect()
    }

    /// Writes the volumes' files under `root`, each mount path below it.
    pub fn write(&self, root: &Path) -> anyhow::Result<()> {
        for (path, bytes) in &self.files {
            let file = root.join(path.strip_prefix("/").unwrap_or(path));
            let written =
                std::fs::create_dir_all(file.parent().unwrap_or(root)).and_then(|_| std::fs::write(&file, bytes));
            written.map_err(|e| bad_input(format!("kube --simulate: {}: {e}", file.display())))?;
        }
        Ok(())
    }
}

/// Runs the pods, pod I with `args[I]` (checked by the caller) and the manifest's env, pod 0
/// last; prints what pod 0 prints; exits as pod 0 does, 1 also when another pod failed (the
/// Job would fail). Every pod is killed by the kernel when this process dies.
pub fn run(args: &[Vec<String>], env: &[(String, String)]) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().map_err(|e| bad_input(format!("kube --simulate: {e}")))?;
    let mut children = Vec::new();
    for (i, words) in args.iter().enumerate().rev() {
        if i + 1 < args.len() {
            std::thread::sleep(POD_GAP);
        }
        // Pod 0's log is the answer: its stdout and stderr go through. The others' say one
        // line each (or their own result when pod 0 could not take it): kept for a failure.
        let mut command = Command::new(&exe);
        command.args(words).envs(env.iter().map(|(n, v)| (n, v))).env("JOB_COMPLETION_INDEX", i.to_string());
        command.stdin(Stdio::null());
        if i > 0 {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        crate::sys::killed_with_parent(&mut command);
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
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| bad_input(format!("kube --simulate: no free local port: {e}")))?;
    Ok(listener.local_addr().map_err(|e| bad_input(format!("kube --simulate: {e}")))?.port())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_paths_stay_below_their_mount() {
        for good in ["a", "data/d.json", "include-0/sub/msg.proto"] {
            assert!(relative(good).is_some(), "{good}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a/..", "./a", "a//b", "a/./b", "a/"] {
            assert!(relative(bad).is_none(), "{bad}");
        }
    }
}
