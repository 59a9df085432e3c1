//! `rpcmeter serve` as a user starts it: a child process on 127.0.0.1 port 0, its address read
//! from its first line (`listening on ADDR`), killed when dropped.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct LabProcess {
    child: Child,
    /// Kept open: a server writing to a closed pipe would fail.
    _stdout: BufReader<std::process::ChildStdout>,
    pub addr: String,
}

impl LabProcess {
    pub fn start(extra: &[&str]) -> LabProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr = first.trim_end().strip_prefix("listening on ").unwrap_or_else(|| panic!("first line: {first:?}"));
        LabProcess { addr: addr.to_string(), child, _stdout: stdout }
    }

    /// The server's process id, to read its cost from /proc.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
