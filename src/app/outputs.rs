//! A run's output files: opened (and so checked) before anything is measured, written after.
//! The primary report is always written first; a side output that fails is named and makes
//! the exit code 1 without costing the others.
use crate::error::{bad_input, output_failed};
use crate::report::{Format, Summary};
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

/// The opened files. Those that did not exist before are removed again when the run fails
/// before measuring anything, so an unreachable target leaves no empty result behind.
pub struct Outputs {
    pub settings: OutputSettings,
    opened: Vec<Opened>,
}

struct Opened {
    path: PathBuf,
    /// None once a sink has taken it.
    file: Option<File>,
    existed: bool,
}

impl Outputs {
    pub fn open(settings: &OutputSettings) -> anyhow::Result<Outputs> {
        let mut opened = Vec::new();
        for (flag, path) in settings.files()? {
            let existed = path.exists();
            let file = File::create(path).map_err(|e| bad_input(format!("{flag} {}: {e}", path.display())))?;
            opened.push(Opened { path: path.to_path_buf(), file: Some(file), existed });
        }
        Ok(Outputs { settings: settings.clone(), opened })
    }

    /// Hands the opened file of `path` to its sink (once).
    pub fn take(&mut self, path: &Path) -> Option<File> {
        self.opened.iter_mut().find(|o| o.path == path)?.file.take()
    }

    /// The run failed before it measured anything: remove the files this run created.
    pub fn discard(&self) {
        for o in self.opened.iter().filter(|o| !o.existed) {
            let _ = std::fs::remove_file(&o.path);
        }
    }

    /// Writes the primary report, then every export. Returns the errors of what failed, each
    /// naming its file; the primary's failure does not stop the exports.
    pub fn write_reports(&mut self, summary: &Summary) -> Vec<anyhow::Error> {
        let mut failed = Vec::new();
        let primary = self.settings.format.exporter().render(summary);
        let written = match self.settings.primary.clone() {
            Some(path) => self.write_file(&path, &primary),
            None => std::io::stdout()
                .write_all(primary.as_bytes())
                .and_then(|_| std::io::stdout().flush())
                .map_err(|e| output_failed(Path::new("-"), e)),
        };
        failed.extend(written.err());
        for (format, path) in self.settings.exports.clone() {
            failed.extend(self.write_file(&path, &format.exporter().render(summary)).err());
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
                Some(path) => drop(std::fs::write(path, &text)),
                None => drop(std::io::stdout().write_all(text.as_bytes())),
            }
        }
        for (_, path) in self.settings.exports.iter().filter(|(f, _)| *f == Format::Junit) {
            let _ = std::fs::write(path, &text);
        }
    }

    fn write_file(&mut self, path: &Path, text: &str) -> anyhow::Result<()> {
        match self.opened.iter_mut().find(|o| o.path == path).and_then(|o| o.file.as_mut()) {
            Some(f) => f.write_all(text.as_bytes()).and_then(|_| f.flush()).map_err(|e| output_failed(path, e)),
            None => Err(output_failed(path, std::io::Error::other("not open"))),
        }
    }
}
