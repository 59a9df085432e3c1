//! The parts of `rpcmeter kube`'s manifest (src/cli/kube.rs): the local files a run reads,
//! shipped in a ConfigMap (a Secret for the client's key and certificate) and mounted where
//! the rewritten args name them; Kubernetes names and quantities checked before printing.
pub mod simulate;
pub mod yaml;

use crate::error::bad_input;
use std::path::{Path, PathBuf};

/// Where the ConfigMap's files appear in the pods.
pub const FILES_DIR: &str = "/etc/rpcmeter/files";
/// Where the Secret's client key and certificate appear in the pods.
pub const TLS_DIR: &str = "/etc/rpcmeter/tls";
/// Every mount `kube` makes in its pods (`--simulate` writes files under these alone).
pub const MOUNTS: [&str; 2] = [FILES_DIR, TLS_DIR];
/// The env vars `kube` sets in its pods, each from a key of a Secret it prints
/// (`--simulate` passes no other to its pods).
pub const ENV: [&str; 3] = [SECRET_ENV, METADATA_ENV, REFLECT_METADATA_ENV];
/// The run's secret, which every shard proves it holds to the coordinator (docs/shards.md).
pub const SECRET_ENV: &str = crate::app::coordinator::trust::SECRET_ENV;
/// `-m`'s credentials, through the environment (Kubernetes expands $(VAR) in args).
pub const METADATA_ENV: &str = "RPCMETER_METADATA";
/// `--reflect-metadata`'s credentials, as `-m`'s.
pub const REFLECT_METADATA_ENV: &str = "RPCMETER_REFLECT_METADATA";
/// The most a ConfigMap or a Secret may hold (the API server's limit on its data).
pub const OBJECT_LIMIT: crate::input::ByteSize = crate::input::ByteSize::mib(1);

/// Files for a ConfigMap or a Secret: its key, the path under the mount, the bytes.
#[derive(Default)]
pub struct Files {
    pub entries: Vec<(String, String, Vec<u8>)>,
}

impl Files {
    /// Adds `bytes` to be mounted at `path` (relative to the mount); returns that path.
    pub fn add(&mut self, path: &str, bytes: Vec<u8>) -> String {
        let key = key_of(self.entries.len(), path);
        self.entries.push((key, path.to_owned(), bytes));
        path.to_owned()
    }

    pub fn size(&self) -> u64 {
        self.entries.iter().map(|(_, _, b)| b.len() as u64).sum()
    }

    /// Refused when larger than Kubernetes takes in one object.
    pub fn check(&self, what: &str) -> anyhow::Result<()> {
        let size = crate::input::ByteSize(self.size());
        if size > OBJECT_LIMIT {
            return Err(bad_input(format!(
                "kube: the files for the {what} come to {size}, more than the {OBJECT_LIMIT} Kubernetes allows in one {what} (use an image holding them, or --image)"
            )));
        }
        Ok(())
    }

    /// The object's `data` (UTF-8 text) and `binaryData` (base64, for protosets), and the
    /// volume's `items` mapping each key to its path.
    pub fn data(&self) -> (serde_json::Map<String, serde_json::Value>, serde_json::Map<String, serde_json::Value>) {
        use base64::Engine;
        let (mut text, mut binary) = (serde_json::Map::new(), serde_json::Map::new());
        for (key, _, bytes) in &self.entries {
            match std::str::from_utf8(bytes) {
                Ok(s) => text.insert(key.clone(), s.into()),
                Err(_) => binary.insert(key.clone(), base64::engine::general_purpose::STANDARD.encode(bytes).into()),
            };
        }
        (text, binary)
    }

    pub fn items(&self) -> Vec<serde_json::Value> {
        self.entries.iter().map(|(key, path, _)| serde_json::json!({"key": key, "path": path})).collect()
    }
}

/// A ConfigMap key (`[-._a-zA-Z0-9]+`, at most 253) for the n-th file, kept readable.
fn key_of(n: usize, path: &str) -> String {
    let name: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-._".contains(c) { c } else { '_' })
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("f{n}-{name}")
}

/// The last part of `path`, as a file name in a mount (`-`: what standard input held).
pub fn base_name(path: &Path, stdin: &str) -> String {
    match path.file_name().and_then(|n| n.to_str()) {
        Some(n) if path != Path::new("-") => n.to_owned(),
        _ => stdin.to_owned(),
    }
}

/// The .proto files a compile of `file` with `import_paths` reads, as `run` compiles it
/// (the import paths, then the file's own directory): for each include directory used, its
/// index and the files' names under it. Checks the .proto on this machine, before any pod.
pub struct ProtoFiles {
    /// (include index, name under it, bytes)
    pub files: Vec<(usize, String, Vec<u8>)>,
    /// The include directories, in order.
    pub includes: Vec<PathBuf>,
    /// Which include and name --proto itself is.
    pub main: (usize, String),
}

pub fn proto_files(file: &Path, import_paths: &[PathBuf]) -> anyhow::Result<ProtoFiles> {
    let pool = crate::schema::compile_proto(file, import_paths)?;
    let mut includes = import_paths.to_vec();
    if file.is_file() {
        includes.push(file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned());
    }
    // The name protox gave --proto: its path under the first include holding it.
    let main = includes
        .iter()
        .enumerate()
        .find_map(|(i, dir)| {
            let rest = file.strip_prefix(dir).ok().or_else(|| dir.join(file).is_file().then_some(file))?;
            Some((i, rest.to_str()?.replace('\\', "/")))
        })
        .filter(|(_, name)| pool.get_file_by_name(name).is_some())
        .ok_or_else(|| {
            bad_input(format!("kube: --proto {}: cannot tell its name under the import paths", file.display()))
        })?;
    let mut files = Vec::new();
    for f in pool.files() {
        // The first include holding it is where protox read it; none: a well-known type
        // that protox ships, as the pod's rpcmeter does.
        let Some((i, path)) =
            includes.iter().enumerate().map(|(i, d)| (i, d.join(f.name()))).find(|(_, p)| p.is_file())
        else {
            continue;
        };
        let bytes = crate::input::read(&path, crate::input::Kind::Proto, &format!("--proto {}", path.display()))?;
        files.push((i, f.name().to_owned(), bytes));
    }
    Ok(ProtoFiles { files, includes, main })
}

/// A name Kubernetes takes for the Job, its pods and its Service: a DNS-1035 label (a
/// Service's name starts with a letter) short enough that `NAME-INDEX` (each pod's hostname)
/// and `NAME-coordinator` stay within 63 characters.
pub fn check_name(name: &str, shards: u32) -> anyhow::Result<()> {
    let label = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !label {
        return Err(bad_input(format!(
            "kube --name {name:?}: not a Kubernetes name (lower-case letters, digits and '-', starting with a letter, ending with a letter or digit)"
        )));
    }
    let longest = name.len() + "-coordinator".len().max(1 + (shards - 1).to_string().len());
    if longest > 63 {
        return Err(bad_input(format!(
            "kube --name {name:?}: too long ({} characters): with its suffixes it must fit in 63",
            name.len()
        )));
    }
    Ok(())
}

/// An image reference with a tag other than `latest`, or a digest: the pods must run the
/// rpcmeter that printed the manifest, not whatever `latest` is on each node.
pub fn check_image(image: &str) -> anyhow::Result<()> {
    let last = image.rsplit('/').next().unwrap_or(image);
    let pinned = image.contains('@') || last.split_once(':').is_some_and(|(_, tag)| !tag.is_empty() && tag != "latest");
    if image.is_empty() || image.chars().any(char::is_whitespace) || !pinned {
        return Err(bad_input(format!(
            "kube --image {image:?}: give a pinned image (NAME:TAG other than latest, or NAME@sha256:...), so that every pod runs the same rpcmeter"
        )));
    }
    Ok(())
}

/// A Kubernetes quantity (`500m`, `2`, `512Mi`, `1G`) above zero, for --cpu and --memory.
pub fn quantity(text: &str) -> Result<String, String> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?}: expected a quantity such as 500m, 2, 512Mi or 1G"))?;
    let known = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if !known.contains(&suffix) || number.starts_with('.') || number.ends_with('.') {
        return Err(format!("{text:?}: expected a quantity such as 500m, 2, 512Mi or 1G"));
    }
    if value <= 0.0 {
        return Err(format!("{text:?}: must be more than 0"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_images_quantities() {
        assert!(check_name("load-1", 3).is_ok());
        assert!(check_name("My_Load.Test", 3).is_err());
        assert!(check_name("1load", 3).is_err(), "a Service's name starts with a letter");
        assert!(check_name(&"a".repeat(60), 3).is_err());
        assert!(check_image("rpcmeter:0.1.0").is_ok());
        assert!(check_image("reg:5000/rpcmeter@sha256:abc").is_ok());
        for bad in ["rpcmeter", "rpcmeter:latest", "reg:5000/rpcmeter", ""] {
            assert!(check_image(bad).is_err(), "{bad}");
        }
        assert!(quantity("500m").is_ok() && quantity("512Mi").is_ok() && quantity("1.5").is_ok());
        for bad in ["0", "1x", "Mi", "-1", ".5"] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
    }
}
