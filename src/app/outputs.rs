//! A run's output files: opened (and so checked) before anything is measured, written after.
//! The primary report is always written first; a side output that fails is named and makes
//! the exit code 1 without costing the others.
use crate::error::{bad_input, output_failed};
use crate::report::Format;
use crate::result::Run;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a run writes and where.
#[derive(Debug, Clone)]
pub struct OutputSettings {
    pub format: Format,
    /// None: standard output.
    pub primary: Option<PathBuf>,
    pub exports: Vec<(Format, PathBuf)>,
    pub csv_details: Option<PathBuf>,
    pub hdr_log: Option<PathBuf>,
}

impl OutputSettings {
    /// Every file with the flag that names it; two flags naming one file is a usage error.
    fn files(&self) -> anyhow::Result<Vec<(&'static str, &Path)>> {
        let mut files: Vec<(&'static str, &Path)> = Vec::new();
        files.extend(self.primary.as_deref().map(|p| ("-o", p)));
        files.extend(self.exports.iter().map(|(_, p)| ("--export", p.as_path())));
        files.extend(self.csv_details.as_deref().map(|p| ("--csv-details", p)));
        files.extend(self.hdr_log.as_deref().map(|p| ("--hdr-log", p)));
        for (i, (flag, path)) in files.iter().enumerate() {
            let same =
                |p: &Path| std::path::absolute(p).ok() == std::path::absolute(path).ok() && p != Path::new("/dev/null");
            if let Some((other, _)) = files[..i].iter().find(|(_, p)| same(p)) {
                return Err(bad_input(format!(
                    "{other} and {flag} both name {}: one would overwrite the other",
                    path.display()
                )));
            }
        }
        Ok(files)
    }
}

/// The opened files: each is written beside its path and renamed into place only once the
/// run is over, so a run that fails or is killed leaves an earlier result whole.
pub struct Outputs {
    pub settings: OutputSettings,
    opened: Vec<Opened>,
}

struct Opened {
    path: PathBuf,
    /// None once discarded (a failed write must not replace a good earlier file).
    file: Option<WholeFile>,
}

impl Outputs {
    pub fn open(settings: &OutputSettings) -> anyhow::Result<Outputs> {
        let mut opened = Vec::new();
        for (flag, path) in settings.files()? {
            let file = WholeFile::create(path).map_err(|e| bad_input(format!("{flag} {}: {e}", path.display())))?;
            opened.push(Opened { path: path.to_path_buf(), file: Some(file) });
        }
        Ok(Outputs { settings: settings.clone(), opened })
    }

    /// A handle on the file of `path` for the sink that streams into it.
    pub fn take(&mut self, path: &Path) -> Option<File> {
        self.opened.iter().find(|o| o.path == path)?.file.as_ref()?.file().try_clone().ok()
    }

    /// The run failed before it measured anything: nothing is written, earlier files stay.
    pub fn discard(&mut self) {
        for o in &mut self.opened {
            o.file = None;
        }
    }

    /// Writes the primary report, then every export. Returns the errors of what failed, each
    /// naming its file; the primary's failure does not stop the exports. `commit` puts them
    /// in place.
    pub fn write_reports(&mut self, result: &Run) -> Vec<anyhow::Error> {
        let mut failed = Vec::new();
        let primary = self.settings.format.exporter().render(result);
        let written = match self.settings.primary.clone() {
            Some(path) => self.write_file(&path, &primary),
            None => std::io::stdout()
                .write_all(primary.as_bytes())
                .and_then(|_| std::io::stdout().flush())
                .map_err(|e| output_failed(Path::new("-"), e)),
        };
        failed.extend(written.err());
        for (format, path) in self.settings.exports.clone() {
            failed.extend(self.write_file(&path, &format.exporter().render(result)).err());
        }
        failed
    }

    /// Puts every file still held in place (after the streams' sinks have finished).
    pub fn commit(&mut self) -> Vec<anyhow::Error> {
        let mut failed = Vec::new();
        for o in &mut self.opened {
            if let Some(file) = o.file.take() {
                failed.extend(file.commit().map_err(|e| output_failed(&o.path, e)).err());
            }
        }
        failed
    }

    /// The run failed before measuring (its files were discarded): JUnit outputs still get a
    /// report naming why, so CI shows a failed test rather than none. Best effort: the
    /// run's own error is what the user sees.
    pub fn write_failed_start(&self, name: Option<&str>, call: &str, target: &str, why: &anyhow::Error) {
        let text = crate::report::junit::failed_to_start(name, call, target, &format!("{why:#}"));
        if self.settings.format == Format::Junit {
            match &self.settings.primary {
                Some(path) => drop(write_whole(path, text.as_bytes())),
                None => drop(std::io::stdout().write_all(text.as_bytes())),
            }
        }
        for (_, path) in self.settings.exports.iter().filter(|(f, _)| *f == Format::Junit) {
            let _ = write_whole(path, text.as_bytes());
        }
    }

    fn write_file(&mut self, path: &Path, text: &str) -> anyhow::Result<()> {
        let Some(opened) = self.opened.iter_mut().find(|o| o.path == path) else {
            return Err(output_failed(path, std::io::Error::other("not open")));
        };
        let Some(file) = opened.file.as_mut() else {
            return Err(output_failed(path, std::io::Error::other("not open")));
        };
        let mut f = file.file();
        let written = f.write_all(text.as_bytes()).and_then(|_| f.flush());
        if written.is_err() {
            // Half a report must not replace a whole earlier one.
            opened.file = None;
        }
        written.map_err(|e| output_failed(path, e))
    }
}

/// A file that a user named, written whole or not at all: the text goes to a temporary file
/// in the same directory (so the rename stays on one file system) that `commit` renames over
/// the path. Until then an earlier file at the path is untouched, whatever happens to the
/// process (a SIGKILL leaves only a hidden `.NAME.*.tmp` beside it). A new file is private
/// (0600: results carry a command line); a file replaced keeps its mode. A device or FIFO
/// (`/dev/null`, `/dev/stdout`) is written through, never replaced; so is a file in a
/// directory where no temporary file can be made.
/// How old an unlocked temporary file must be to be an orphan: far more than the moment
/// between a writer creating its file and locking it.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes what killed writers of `name` left in `dir`: `.NAME.XXXXXX.tmp` files whose lock
/// nobody holds (a SIGKILL skips the temporary file's removal; its lock dies with the
/// process). Best effort: what cannot be opened or removed stays.
fn remove_orphans(dir: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(middle) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)?.strip_suffix(".tmp")) else {
            continue;
        };
        // tempfile's random part: 6 letters and digits, nothing a user would name a file.
        if middle.len() != 6 || !middle.bytes().all(|b| b.is_ascii_alphanumeric()) {
            continue;
        }
        // Unlocked and not new: a live writer locks its file right after creating it.
        let settled =
            entry.metadata().ok().and_then(|m| m.modified().ok()?.elapsed().ok()).is_some_and(|age| age > ORPHAN_AGE);
        let path = entry.path();
        let orphan = settled && std::fs::File::open(&path).is_ok_and(|f| f.try_lock().is_ok());
        if orphan {
            let _ = std::fs::remove_file(&path);
        }
    }
}

pub struct WholeFile {
    inner: Inner,
}

enum Inner {
    Temp { temp: tempfile::NamedTempFile, target: PathBuf },
    Through(File),
}

impl WholeFile {
    pub fn create(path: &Path) -> std::io::Result<WholeFile> {
        // A link is followed: the file it names is replaced, the link stays.
        let target = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            _ => path.to_path_buf(),
        };
        let existing = std::fs::metadata(&target).ok();
        if existing.as_ref().is_some_and(|m| !m.is_file()) {
            // A device or FIFO is written through; a directory fails here, with its own error.
            return Ok(WholeFile { inner: Inner::Through(File::create(&target)?) });
        }
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = target.file_name().map_or("out".into(), |n| n.to_string_lossy());
        remove_orphans(dir, &name);
        let temp = match tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir) {
            Ok(temp) => temp,
            // A file the user may write in a directory they may not: written in place, as
            // before (no whole-or-nothing then, but no refusal either).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && existing.is_some() => {
                return Ok(WholeFile { inner: Inner::Through(File::create(&target)?) });
            }
            Err(e) => {
                // tempfile names its random file in the message; the user named the path.
                let text = e.to_string();
                return Err(std::io::Error::new(e.kind(), text.split(" at path ").next().unwrap_or(&text).to_string()));
            }
        };
        if let Some(m) = existing {
            temp.as_file().set_permissions(m.permissions())?;
        }
        // Held until the file is closed: a later run tells a live writer's file from the
        // orphan of a killed one by whether it can take this lock (`remove_orphans`).
        temp.as_file().try_lock().map_err(std::io::Error::from)?;
        Ok(WholeFile { inner: Inner::Temp { temp, target } })
    }

    /// The file being written.
    pub fn file(&self) -> &File {
        match &self.inner {
            Inner::Temp { temp, .. } => temp.as_file(),
            Inner::Through(f) => f,
        }
    }

    /// Puts the file in place: on disk first, then renamed over the path.
    pub fn commit(self) -> std::io::Result<()> {
        match self.inner {
            Inner::Temp { temp, target } => {
                temp.as_file().sync_all()?;
                temp.persist(&target).map(drop).map_err(|e| e.error)
            }
            Inner::Through(mut f) => f.flush(),
        }
    }
}

/// Writes `bytes` to `path` whole (see `WholeFile`).
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file = WholeFile::create(path)?;
    let mut f = file.file();
    f.write_all(bytes)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_only_when_committed_and_a_link_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        let file = WholeFile::create(&path).unwrap();
        file.file().write_all(b"half").unwrap();
        drop(file);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the temporary file was left");
        write_whole(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");

        let link = dir.path().join("latest.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        write_whole(&link, b"newer").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "newer");
        let err = write_whole(&dir.path().join("no/such/dir.json"), b"x").unwrap_err();
        assert!(!err.to_string().contains(".tmp"), "{err}");
    }
}
