//! `rpcmeter kube`: the manifest as Kubernetes reads it (decoded strictly into the API types
//! by tests/kube_decode, a Go program using k8s.io/api), and its pods run on this machine
//! from the manifest alone: files from the ConfigMap, args as the kubelet expands them.
mod common;

use common::{Behaviour, TestServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn kube(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("kube").args(args).output().unwrap()
}

/// Exit 2 with one line naming `word`.
fn refused(args: &[&str], word: &str) {
    let out = kube(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(word), "{args:?}: {stderr}");
}

fn objects(stdout: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(stdout).unwrap();
    match v["kind"].as_str() {
        Some("List") => v["items"].as_array().unwrap().clone(),
        _ => vec![v],
    }
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn args_of(job: &Value) -> Vec<String> {
    job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// A .proto importing another from a subdirectory, a -D file, CA, client certificate and key.
fn inputs(dir: &Path) {
    std::fs::create_dir_all(dir.join("protos/sub")).unwrap();
    std::fs::write(
        dir.join("protos/sub/msg.proto"),
        "syntax = \"proto3\";\n\nmessage Message {\n  string content = 1;\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("protos/echo.proto"),
        "syntax = \"proto3\";\nimport \"sub/msg.proto\";\n\nservice EchoService {\n  rpc echo (Message) returns (Message) {}\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("d.json"), "{\"content\": \"hi: yes\"}\n{\"content\": \"  two\"}\n").unwrap();
    for f in ["ca.pem", "client.pem", "client.key"] {
        std::fs::write(dir.join(f), format!("-----BEGIN {f}-----\nAAAA\n-----END {f}-----\n")).unwrap();
    }
}

/// `kube --shards 3 run ...` with every kind of local file, a credential and live metrics.
fn full_manifest(dir: &Path, output: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir)
        .args(["kube", "--shards", "3", "--name", "load-1", "--output", output, "run"])
        .args(["--proto", "protos/echo.proto", "-D", "d.json", "--cacert", "ca.pem"])
        .args(["--cert", "client.pem", "--key", "client.key", "-m", r#"{"authorization":"Bearer s3cr3t"}"#])
        .args(["--call", "EchoService/echo", "--rps", "300", "-z", "10s", "--metrics-addr", "127.0.0.1:9464"])
        .arg("svc:443")
        .output()
        .unwrap()
}

/// The decoder, built once per test binary; None when Go is not installed.
fn decoder() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let bin = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kube_decode");
            let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kube_decode");
            let status = Command::new("go").current_dir(&src).args(["build", "-o"]).arg(&bin).arg(".").status();
            match status {
                Err(_) => None,
                Ok(s) => {
                    assert!(s.success(), "go build of tests/kube_decode failed");
                    Some(bin)
                }
            }
        })
        .clone()
}

/// Runs the decoder on `manifest`: its stdout, or a failure with its stderr.
fn decode(bin: &Path, manifest: &[u8], flag: &[&str]) -> String {
    use std::io::Write;
    let mut child = Command::new(bin)
        .args(flag)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(manifest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(manifest));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_printed_object_decodes_strictly_into_the_kubernetes_types() {
    let Some(bin) = decoder() else {
        eprintln!("skipped: go is not installed (tests/kube_decode needs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path());
    let yaml = full_manifest(dir.path(), "yaml");
    assert!(yaml.status.success(), "{}", String::from_utf8_lossy(&yaml.stderr));
    let json = full_manifest(dir.path(), "json");
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let summary = decode(&bin, &yaml.stdout, &[]);
    let kinds = [
        "ConfigMap load-1-files",
        "Secret load-1-tls",
        "Secret load-1-metadata",
        "Secret load-1-coordinator",
        "Service load-1",
        "Job load-1 completions=3",
    ];
    for kind in kinds {
        assert!(summary.contains(kind), "{summary}");
    }
    decode(&bin, &json.stdout, &[]);
    // What the YAML says is what was meant: the same objects as the JSON, file for file.
    let from_yaml: Vec<Value> =
        decode(&bin, &yaml.stdout, &["-json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let from_json = objects(&json.stdout);
    assert_eq!(from_yaml.len(), from_json.len());
    let cm = of_kind(&from_yaml, "ConfigMap")[0];
    assert_eq!(cm["data"], of_kind(&from_json, "ConfigMap")[0]["data"]);
    let files: Vec<&str> = cm["data"].as_object().unwrap().values().map(|v| v.as_str().unwrap()).collect();
    for f in ["protos/echo.proto", "protos/sub/msg.proto", "d.json", "ca.pem"] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(files.contains(&text.as_str()), "{f} not shipped as it is: {cm}");
    }
    assert_eq!(args_of(of_kind(&from_yaml, "Job")[0]), args_of(of_kind(&from_json, "Job")[0]));
    assert_eq!(of_kind(&from_yaml, "Service")[0]["spec"], of_kind(&from_json, "Service")[0]["spec"]);
}

/// What a Kubernetes user needs from the Job: resources, spread, deadline, TTL, fail-fast, a
/// pinned image, files mounted where the args name them, the formats of one answer.
#[test]
fn the_job_carries_its_files_and_what_a_cluster_needs() {
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path());
    let out = full_manifest(dir.path(), "json");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = objects(&out.stdout);
    let job = of_kind(&all, "Job")[0];
    let spec = &job["spec"];
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], format!("rpcmeter:{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(container["resources"]["limits"]["cpu"], "1");
    assert_eq!(container["resources"]["requests"]["memory"], "512Mi");
    assert_eq!(pod["topologySpreadConstraints"][0]["topologyKey"], "kubernetes.io/hostname");
    // A failed shard fails its index alone, never retried: pod 0 outlives it to report.
    assert_eq!(spec["backoffLimitPerIndex"], 0);
    assert!(spec["backoffLimit"].is_null() && spec["podFailurePolicy"].is_null(), "{spec}");
    assert_eq!(container["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(pod["automountServiceAccountToken"], false);
    // Pods starting up to 5 min apart, 5 min to join, 10 s of load, 5 s drain, 10 s connect
    // timeout, 1 min margin.
    assert_eq!(spec["activeDeadlineSeconds"], 2 * 300 + 10 + 5 + 10 + 60);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("# kubectl apply --server-side -f FILE\n"), "{said}");
    assert_eq!(spec["ttlSecondsAfterFinished"], 3600);
    let ports: Vec<&Value> = container["ports"].as_array().unwrap().iter().map(|p| &p["containerPort"]).collect();
    assert_eq!(ports, [7450, 9464]);
    // Pod 0 found by its name under the headless Service, which exists before it is ready;
    // the pods start when all have joined it, not at a time fixed when printing.
    let service = of_kind(&all, "Service")[0];
    assert_eq!(service["metadata"]["name"], "load-1");
    assert_eq!(pod["subdomain"], "load-1");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(service["spec"]["selector"], spec["template"]["metadata"]["labels"]);
    assert_eq!(service["spec"]["ports"][0]["port"], 7450);
    let args = args_of(job);
    for pair in
        [["--shard", "$(JOB_COMPLETION_INDEX)/3"], ["--coordinator", "load-1-0.load-1:7450"], ["--join-timeout", "5m"]]
    {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} not in {args:?}");
    }
    assert!(!args.iter().any(|a| a == "--start-at" || a == "--format"), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--metrics-addr", "0.0.0.0:9464"]), "{args:?}");
    assert!(!job.to_string().contains("s3cr3t"));
    // Every file the args name is one the volumes put there.
    let mounted: Vec<String> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|v| {
            let (dir, source) = match v["name"].as_str().unwrap() {
                "files" => ("/etc/rpcmeter/files", &v["configMap"]),
                _ => ("/etc/rpcmeter/tls", &v["secret"]),
            };
            source["items"].as_array().unwrap().iter().map(move |i| format!("{dir}/{}", i["path"].as_str().unwrap()))
        })
        .collect();
    for flag in ["--proto", "--data-file", "--cacert", "--cert", "--key"] {
        let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{flag} not in {args:?}"));
        assert!(mounted.contains(&args[at + 1]), "{flag} {} is not mounted: {mounted:?}", args[at + 1]);
    }
    let at = args.iter().position(|a| a == "--import-paths").unwrap();
    assert_eq!(args[at + 1], "/etc/rpcmeter/files/include-0");
    assert!(mounted.contains(&"/etc/rpcmeter/files/include-0/sub/msg.proto".to_owned()), "{mounted:?}");
    assert_eq!(of_kind(&all, "Secret").len(), 3);
    // The run's secret, new at every print, reaches the pods through the env alone.
    let secret_of = |all: &[Value]| {
        let s = of_kind(all, "Secret").into_iter().find(|s| s["metadata"]["name"] == "load-1-coordinator").unwrap();
        s["stringData"]["secret"].as_str().unwrap().to_owned()
    };
    let secret = secret_of(&all);
    assert!(secret.len() >= 32 && !job.to_string().contains(&secret), "{secret}");
    let env = container["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "RPCMETER_COORDINATOR_SECRET"
        && e["valueFrom"]["secretKeyRef"] == serde_json::json!({"name": "load-1-coordinator", "key": "secret"})));
    assert_ne!(secret_of(&objects(&full_manifest(dir.path(), "json").stdout)), secret);
}

#[test]
fn what_would_fail_on_the_cluster_is_refused_when_printing() {
    let run = ["run", "--plaintext", "--call", "EchoService/echo", "-z", "10s", "svc:9000"];
    let with = |before: &[&'static str], after: &[&'static str]| -> Vec<&'static str> {
        before.iter().chain(&run).chain(after).copied().collect()
    };
    refused(&with(&["--shards", "2", "--name", "My_Load.Test"], &[]), "--name");
    refused(&with(&["--shards", "2", "--name", "1load"], &[]), "--name");
    refused(&with(&["--shards", "2"], &["--join-timeout", "1m"]), "kube --join-timeout");
    refused(&with(&["--shards", "2"], &["--shard", "0/2", "--coordinator", "h:1"]), "--coordinator");
    refused(
        &with(&["--shards", "2", "--coordinator-port", "9464"], &["--metrics-addr", "0.0.0.0:9464"]),
        "--coordinator-port",
    );
    refused(&with(&["--shards", "3"], &["-c", "2"]), "no worker of its own");
    refused(&with(&["--shards", "2", "--image", "rpcmeter:latest"], &[]), "--image");
    refused(&with(&["--shards", "2", "--image", "rpcmeter"], &[]), "--image");
    refused(&with(&["--shards", "2", "--cpu", "0"], &[]), "--cpu");
    for flag in
        [&["-o", "r.json"][..], &["--export", "json=r.json"], &["--csv-details", "c.csv"], &["--hdr-log", "h.log"]]
    {
        refused(&with(&["--shards", "2"], flag), flag[0]);
    }
    refused(&with(&["--shards", "2"], &["--metrics-addr", "0.0.0.0:0"]), "--metrics-addr");
    refused(&with(&["--shards", "2"], &["--format", "csv"]), "--format csv");
    refused(&["--shards", "2", "run", "--plaintext", "--call", "E/e", "-n", "100", "h:1"], "--timeout");
    // A ConfigMap holds at most 1 MiB.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, format!("{{\"content\":\"{}\"}}", "x".repeat(1_200_000))).unwrap();
    let mut args = with(&["--shards", "2"], &["-D"]);
    args.push(big.to_str().unwrap());
    refused(&args, "1 MiB");
}

/// The manifest's pods, run here as the kubelet would run them: the ConfigMap's files
/// written under a temporary directory standing in for the mount, $(JOB_COMPLETION_INDEX)
/// and the Secret's $(VAR)s expanded, pod 0's name under the Service standing for 127.0.0.1.
/// `-q` and `--format table` given to `run` must not make the pods refuse their own args;
/// pod 0, started last, prints the merge of both, whose count is the server's.
#[test]
fn the_printed_pods_run_and_merge_to_the_servers_count() {
    // The manifest as printed by default, read by Kubernetes' own decoder.
    let Some(decoder) = decoder() else {
        eprintln!("skipped: go is not installed (tests/kube_decode needs it)");
        return;
    };
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir.path())
        .args(["kube", "--shards", "2", "run", "-q", "--plaintext"])
        .args(["--proto", "protos/echo.proto", "-D", "d.json", "--call", "EchoService/echo"])
        .args(["--rps", "200", "-z", "1s", "--format", "table", "--no-server-stats"])
        .arg(server.addr.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all: Vec<Value> =
        decode(&decoder, &out.stdout, &["-json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mount = dir.path().join("mount");
    for cm in of_kind(&all, "ConfigMap") {
        let job = of_kind(&all, "Job")[0];
        for item in job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"].as_array().unwrap() {
            let path = mount.join(item["path"].as_str().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, cm["data"][item["key"].as_str().unwrap()].as_str().unwrap()).unwrap();
        }
    }
    let args = args_of(of_kind(&all, "Job")[0]);
    // The run's secret, which the kubelet would put in the pods' env from its Secret.
    let coordinator = of_kind(&all, "Secret").into_iter().find(|s| s["metadata"]["name"] == "rpcmeter-coordinator");
    let secret = coordinator.unwrap()["stringData"]["secret"].as_str().unwrap().to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Pod 1 first: it waits for pod 0, as on a cluster where pod 0 is scheduled late.
    let pods: Vec<_> = [1, 0]
        .into_iter()
        .map(|i| {
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    let a = a
                        .replace("/etc/rpcmeter/files", mount.to_str().unwrap())
                        .replace("$(JOB_COMPLETION_INDEX)", &i.to_string())
                        .replace("rpcmeter-0.rpcmeter:7450", &format!("127.0.0.1:{port}"));
                    if a == "table" {
                        "json".to_owned()
                    } else {
                        a
                    }
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(700));
            Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
                .args(&args)
                .env("RPCMETER_COORDINATOR_SECRET", &secret)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let logs: Vec<_> = pods.into_iter().map(|pod| pod.wait_with_output().unwrap()).collect();
    for out in &logs {
        assert!(out.status.success(), "a pod failed: {args:?}");
    }
    assert!(logs[0].stdout.is_empty(), "pod 1 gives its result to pod 0");
    let merged: Value = serde_json::from_slice(&logs[1].stdout).unwrap();
    assert_eq!(merged["requests"]["total"].as_u64().unwrap(), server.calls(), "{merged}");
    assert_eq!(merged["requests"]["failed"], 0, "{merged}");
}

/// `kube --simulate` runs a printed manifest's pods here (a local .proto with an import, -D
/// data, a credential through a Secret) and prints their merged result: its count is the
/// server's. It reads the YAML `kube` prints by default.
#[test]
fn simulate_runs_the_printed_pods_and_merges_them() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path());
    let bin = env!("CARGO_BIN_EXE_rpcmeter");
    let manifest = Command::new(bin)
        .current_dir(dir.path())
        .args(["kube", "--shards", "3", "run", "--plaintext", "--proto", "protos/echo.proto"])
        .args(["-D", "d.json", "-m", r#"{"authorization":"Bearer s3cr3t"}"#, "--call", "EchoService/echo"])
        .args(["--rps", "300", "-z", "1s", "--no-server-stats"])
        .arg(server.addr.to_string())
        .output()
        .unwrap();
    assert!(manifest.status.success(), "{}", String::from_utf8_lossy(&manifest.stderr));
    let file = dir.path().join("load.yaml");
    std::fs::write(&file, &manifest.stdout).unwrap();
    let out = Command::new(bin).args(["kube", "--output", "json", "--simulate"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"]["total"].as_u64().unwrap(), server.calls(), "{merged}");
    assert_eq!(merged["requests"]["failed"], 0, "{merged}");
    assert_eq!(merged["shards"].as_array().map(Vec::len), Some(3), "{merged}");
}

/// A simulated Job whose pods all fail (nothing listens at the target) ends promptly, exits
/// as pod 0 does (1) and says why, each other pod's words prefixed with its index, rather
/// than leaving the other pods waiting out --join-timeout for a pod 0 that is gone.
#[test]
fn simulate_exits_as_pod_0_and_names_the_failed_pods() {
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let manifest = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir.path())
        .args(["kube", "--shards", "2", "--output", "json", "run", "--plaintext", "--proto", "protos/echo.proto"])
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"x"}"#, "--rps", "100", "-z", "1s"])
        .arg(closed.to_string())
        .output()
        .unwrap();
    assert!(manifest.status.success(), "{}", String::from_utf8_lossy(&manifest.stderr));
    let file = dir.path().join("load.json");
    std::fs::write(&file, &manifest.stdout).unwrap();
    let began = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(["kube", "--simulate"]).arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("shard 0/2") && stderr.contains("pod 1: "), "{stderr}");
    assert!(began.elapsed() < std::time::Duration::from_secs(60), "took {:?}", began.elapsed());
}

/// A printed JSON manifest (2 pods, a -D file in the ConfigMap, a credential in a Secret) for
/// the target `addr`, as a Value to tamper with.
fn printed(dir: &Path, addr: &str, length: &str) -> Value {
    inputs(dir);
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir)
        .args(["kube", "--shards", "2", "--output", "json", "run", "--plaintext", "--proto", "protos/echo.proto"])
        .args(["-D", "d.json", "-m", r#"{"authorization":"Bearer s3cr3t"}"#, "--call", "EchoService/echo"])
        .args(["--rps", "50", "-z", length, "--no-server-stats", addr])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn job_of(manifest: &mut Value) -> &mut Value {
    let items = manifest["items"].as_array_mut().unwrap();
    items.iter_mut().find(|o| o["kind"] == "Job").unwrap()
}

fn simulate(dir: &Path, manifest: &Value) -> std::process::Output {
    let file = dir.join("tampered.json");
    std::fs::write(&file, serde_json::to_vec(manifest).unwrap()).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir)
        .args(["kube", "--simulate"])
        .arg(&file)
        .output()
        .unwrap()
}

/// `kube --simulate` runs only what `kube` prints: a manifest whose files would land outside
/// its private directory, whose env reaches the pods (LD_PRELOAD ran code in both pods), with
/// a command of its own, a flag writing a file, or a file read from elsewhere is refused in
/// one line, exit 2, before any pod starts and before any file is written.
#[test]
fn simulate_refuses_what_kube_never_prints() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let manifest = printed(dir.path(), &closed, "1s");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let pwned = outside.join("pwned");
    type Tamper = Box<dyn Fn(&mut Value)>;
    let volume_item = |path: String| -> Tamper {
        Box::new(move |m: &mut Value| {
            job_of(m)["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"][0]["path"] = path.clone().into()
        })
    };
    let container = |f: fn(&mut Value)| -> Tamper {
        Box::new(move |m: &mut Value| f(&mut job_of(m)["spec"]["template"]["spec"]["containers"][0]))
    };
    let depth = "../".repeat(12);
    let cases: Vec<(&str, Tamper, &str)> = vec![
        ("absolute item path", volume_item(pwned.to_string_lossy().into_owned()), "path"),
        ("../ item path", volume_item(format!("{depth}{}", pwned.to_string_lossy())), "path"),
        ("item path ending in ..", volume_item("data/..".into()), "path"),
        (
            "LD_PRELOAD",
            container(|c| {
                c["env"].as_array_mut().unwrap().push(serde_json::json!({"name": "LD_PRELOAD", "value": "/x.so"}))
            }),
            "LD_PRELOAD",
        ),
        ("envFrom", container(|c| c["envFrom"] = serde_json::json!([{"secretRef": {"name": "x"}}])), "envFrom"),
        ("a command", container(|c| c["command"] = serde_json::json!(["sh", "-c", "touch pwned"])), "command"),
        ("a mount elsewhere", container(|c| c["volumeMounts"][0]["mountPath"] = "/tmp".into()), "/tmp"),
        (
            "-o FILE",
            container(|c| c["args"].as_array_mut().unwrap().extend(["-o".into(), "out.json".into()])),
            "--output",
        ),
        (
            "--history PATH",
            container(|c| c["args"].as_array_mut().unwrap().extend(["--history".into(), "h.sqlite3".into()])),
            "--history",
        ),
        (
            "a file read from elsewhere",
            container(|c| {
                let args = c["args"].as_array_mut().unwrap();
                let at = args.iter().position(|a| a == "--data-file").unwrap();
                args[at + 1] = "/etc/hostname".into();
            }),
            "/etc/hostname",
        ),
        ("another program", container(|c| c["args"][0] = "serve".into()), "run"),
        (
            "two containers",
            Box::new(|m: &mut Value| {
                let spec = &mut job_of(m)["spec"]["template"]["spec"];
                let second = spec["containers"][0].clone();
                spec["containers"].as_array_mut().unwrap().push(second);
            }),
            "container",
        ),
        (
            "an init container",
            Box::new(|m: &mut Value| {
                let spec = &mut job_of(m)["spec"]["template"]["spec"];
                spec["initContainers"] = serde_json::json!([{"name": "x", "image": "busybox", "command": ["true"]}]);
            }),
            "initContainers",
        ),
    ];
    for (what, tamper, word) in cases {
        let mut m = manifest.clone();
        tamper(&mut m);
        let out = simulate(dir.path(), &m);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: {stderr}");
        assert!(stderr.contains(word), "{what}: {stderr}");
        assert!(!pwned.exists() && !dir.path().join("pwned").exists(), "{what}: a file was written outside");
        assert!(!dir.path().join("out.json").exists(), "{what}: a pod wrote its result");
    }
}

/// The processes whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the comm may hold spaces, so read after its ')'.
            let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
            after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid)
        })
        .collect()
}

/// Alive: in /proc and not a zombie waiting for its reaper.
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().chars().next()).unwrap_or(None);
    !matches!(state, None | Some('Z') | Some('X'))
}

/// A simulation's pods die with it, by SIGTERM and by SIGKILL alike: none goes on loading the
/// target once `kube --simulate` is gone.
#[test]
fn simulated_pods_die_with_the_simulation() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let manifest = printed(dir.path(), &server.addr.to_string(), "60s");
    let file = dir.path().join("load.json");
    std::fs::write(&file, serde_json::to_vec(&manifest).unwrap()).unwrap();
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let mut simulation = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["kube", "--simulate"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Both pods started and the load under way.
        let before = server.calls();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let pods = loop {
            let pods = children_of(simulation.id());
            if pods.len() == 2 && server.calls() > before {
                break pods;
            }
            assert!(std::time::Instant::now() < until, "the pods never loaded the target");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // SAFETY: a plain kill(2) of our own child, not yet waited for.
        unsafe { libc::kill(simulation.id() as i32, signal) };
        simulation.wait().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while pods.iter().any(|&p| alive(p)) {
            assert!(std::time::Instant::now() < until, "signal {signal}: pods {pods:?} outlived the simulation");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A workload and the data file it names travel in the ConfigMap: printed in one directory,
/// the manifest runs under `--simulate` from another once the originals are gone, and the
/// calls carry the data file's request.
#[test]
fn a_workload_and_its_data_files_travel_with_the_manifest() {
    let server = TestServer::start(Behaviour::Echo);
    let here = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(here.path().join("w/data")).unwrap();
    std::fs::write(here.path().join("w/data/get.jsonl"), "{\"content\": \"from the data file\"}\n").unwrap();
    let mix = "[[call]]\nname = \"get\"\nmethod = \"EchoService/echo\"\ndata_file = \"data/get.jsonl\"\nweight = 1\n";
    std::fs::write(here.path().join("w/mix.toml"), mix).unwrap();
    let manifest = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(here.path())
        .args(["kube", "--shards", "2", "run", "--plaintext", "--proto"])
        .arg(common::echo_proto())
        .args(["--workload", "w/mix.toml", "--rps", "100", "-z", "1s", "--no-server-stats"])
        .arg(server.addr.to_string())
        .output()
        .unwrap();
    assert!(manifest.status.success(), "{}", String::from_utf8_lossy(&manifest.stderr));
    drop(here);
    let merged = simulated_elsewhere(&manifest.stdout);
    assert_eq!(merged["requests"]["total"].as_u64().unwrap(), server.calls(), "{merged}");
    assert_eq!(merged["requests"]["failed"], 0, "{merged}");
    let contents = server.contents();
    assert!(!contents.is_empty() && contents.iter().all(|(_, c)| c.contains("from the data file")), "{contents:?}");
}

/// A pod killed mid-run fails the Job through pod 0: pod 0 prints the partial merge naming
/// that shard and exits 1, and the simulation with it (on a cluster, the Job's
/// backoffLimitPerIndex leaves pod 0 running until it has reported).
#[test]
fn a_pod_killed_mid_run_is_named_in_pod_0s_partial_merge() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let manifest = printed(dir.path(), &server.addr.to_string(), "8s");
    let file = dir.path().join("load.json");
    std::fs::write(&file, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let simulation = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["kube", "--output", "json", "--simulate"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Pod 1 (its args say --shard 1/2) killed once both pods load the target.
    let before = server.calls();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pod1 = loop {
        let pods = children_of(simulation.id());
        let cmdline = |p: &u32| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
        if let (2, Some(pod1)) = (pods.len(), pods.iter().find(|p| cmdline(p).contains("1/2\0"))) {
            if server.calls() > before + 50 {
                break *pod1;
            }
        }
        assert!(std::time::Instant::now() < until, "the pods never loaded the target");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // SAFETY: a plain kill(2) of a process we watched start; it is not ours to reap.
    unsafe { libc::kill(pod1 as i32, libc::SIGKILL) };
    let out = simulation.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(merged["partial"], true, "{merged}");
    assert_eq!(merged["missing_shards"][0]["shard"], "1/2", "{merged}");
}

/// `--assert` judges the merged run in pod 0, never a pod's 1/N share: over 2 pods at 100
/// calls/s as a whole, `rps>=80` passes (each share is 50/s) and `rps>=150` fails, exit 1.
#[test]
fn pod_0_judges_the_merged_run() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let judged = |check: &str| {
        let manifest = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .current_dir(dir.path())
            .args(["kube", "--shards", "2", "run", "--plaintext", "--proto"])
            .arg(common::echo_proto())
            .args(["--call", "EchoService/echo", "-d", r#"{"content":"x"}"#, "--rps", "100", "-z", "2s"])
            .args(["--no-server-stats", "--assert", check])
            .arg(server.addr.to_string())
            .output()
            .unwrap();
        assert!(manifest.status.success(), "{}", String::from_utf8_lossy(&manifest.stderr));
        let file = dir.path().join("load.yaml");
        std::fs::write(&file, &manifest.stdout).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["kube", "--output", "json", "--simulate"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stderr)
    };
    let (code, stderr) = judged("rps>=80");
    assert_eq!(code, Some(0), "rps>=80 over 100/s: {stderr}");
    let (code, stderr) = judged("rps>=150");
    assert_eq!(code, Some(1), "rps>=150 over 100/s: {stderr}");
}

/// A grpc-go style binary log of `n` echo calls 2 ms apart, call i's request "call i".
fn echo_log(n: u64) -> Vec<u8> {
    use rpcmeter::replay::log::Framing;
    use rpcmeter::replay::proto::grpc_log_entry::{EventType, Payload};
    use rpcmeter::replay::proto::{ClientHeader, GrpcLogEntry, Message, Trailer};
    let entry = |call: u64, ns: u64, kind: EventType, payload: Payload| GrpcLogEntry {
        timestamp: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: ns as i32 }),
        call_id: call,
        sequence_id_within_call: 1,
        r#type: kind as i32,
        logger: 2,
        payload_truncated: false,
        payload: Some(payload),
        peer: None,
    };
    let mut out = Vec::new();
    for call in 1..=n {
        let content = format!("call {call}");
        let mut request = vec![0x0a, content.len() as u8];
        request.extend(content.as_bytes());
        let ns = call * 2_000_000;
        let header = ClientHeader { method_name: "/EchoService/echo".into(), ..Default::default() };
        let message = Message { length: request.len() as u32, data: request };
        for e in [
            entry(call, ns, EventType::ClientHeader, Payload::ClientHeader(header)),
            entry(call, ns + 10, EventType::ClientMessage, Payload::Message(message)),
            entry(call, ns + 500_000, EventType::ServerTrailer, Payload::Trailer(Trailer::default())),
        ] {
            Framing::Be32.write(&mut out, &e).unwrap();
        }
    }
    out
}

/// `run --replay`'s log travels in the ConfigMap: the manifest runs under `--simulate` once
/// the log is gone, each pod sends every other call, and together they send each logged call
/// once; a log over what a ConfigMap holds is refused in one line.
#[test]
fn a_replayed_log_travels_with_the_manifest_and_each_pod_sends_every_nth_call() {
    let server = TestServer::start(Behaviour::Echo);
    let here = tempfile::tempdir().unwrap();
    std::fs::write(here.path().join("calls.binlog"), echo_log(40)).unwrap();
    let print = |log: &str| {
        Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .current_dir(here.path())
            .args([
                "kube",
                "--output",
                "json",
                "--shards",
                "2",
                "run",
                "--plaintext",
                "--replay",
                log,
                "--no-server-stats",
            ])
            .arg(server.addr.to_string())
            .output()
            .unwrap()
    };
    let manifest = print("calls.binlog");
    assert!(manifest.status.success(), "{}", String::from_utf8_lossy(&manifest.stderr));
    let job = objects(&manifest.stdout).into_iter().find(|o| o["kind"] == "Job").unwrap();
    assert!(args_of(&job).iter().any(|a| a.ends_with("/etc/rpcmeter/files/replay/calls.binlog")), "{job}");

    // Over 1 MiB: refused, saying what to do instead.
    let big = here.path().join("big.binlog");
    std::fs::write(&big, echo_log(40).repeat(1 + (1 << 20) / echo_log(40).len())).unwrap();
    let refused = print("big.binlog");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("more than the 1.0 MiB a ConfigMap holds") && stderr.contains("--shards"), "{stderr}");
    drop(here);

    let merged = simulated_elsewhere(&manifest.stdout);
    assert_eq!(merged["requests"]["total"].as_u64(), Some(40), "{merged}");
    assert_eq!(merged["replay"]["calls_in_log"].as_u64(), Some(40), "{}", merged["replay"]);
    assert_eq!(merged["replay"]["recorded"]["EchoService/echo"]["requests"]["total"].as_u64(), Some(40));
    let mut sent: Vec<String> = server.contents().into_iter().map(|(_, c)| c).collect();
    sent.sort();
    let mut logged: Vec<String> = (1..=40).map(|i| format!("call {i}")).collect();
    logged.sort();
    assert_eq!(sent, logged, "each logged call sent once, by one of the pods");
}

/// `manifest` simulated from a directory of its own (where none of the files it ships are),
/// which must succeed: its merged JSON result.
fn simulated_elsewhere(manifest: &[u8]) -> Value {
    let elsewhere = tempfile::tempdir().unwrap();
    let file = elsewhere.path().join("load.yaml");
    std::fs::write(&file, manifest).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(elsewhere.path())
        .args(["kube", "--output", "json", "--simulate"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}
