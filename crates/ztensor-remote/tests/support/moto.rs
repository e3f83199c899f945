//! A real S3 server for tests: moto's (`moto[server]` from the Python registry), started on
//! 127.0.0.1 at a free port and stopped by its pid when the guard drops.
//!
//! Where moto is looked for: `$ZTENSOR_MOTO_SERVER`, `target/py-venv/bin/moto_server` (what
//! `cargo xtask ci` installs), `moto_server` on the `PATH`. When none starts, a test prints
//! that it was skipped and why, unless `ZTENSOR_REQUIRE_MOTO=1` (CI sets it): then it fails.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server, killed (by its pid) and reaped on drop.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn candidates() -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(path) = std::env::var_os("ZTENSOR_MOTO_SERVER") {
        found.push(PathBuf::from(path));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    found.push(root.join("target/py-venv/bin/moto_server"));
    found.push(PathBuf::from("moto_server"));
    found
}

/// Starts moto, or says why not: `None` (the test is skipped, saying so) unless
/// `ZTENSOR_REQUIRE_MOTO=1`, which makes it a failure.
pub fn start(test: &str) -> Option<Moto> {
    start_with(test, &[])
}

/// As [`start`], with `env` set for the server (`INITIAL_NO_AUTH_ACTION_COUNT=0` makes it
/// check credentials).
pub fn start_with(test: &str, env: &[(&str, &str)]) -> Option<Moto> {
    let mut why = Vec::new();
    for program in candidates() {
        match try_start(&program, env) {
            Ok(moto) => return Some(moto),
            Err(e) => why.push(format!("{}: {e}", program.display())),
        }
    }
    let why = why.join("; ");
    if std::env::var("ZTENSOR_REQUIRE_MOTO").is_ok_and(|v| v == "1") {
        panic!("{test}: ZTENSOR_REQUIRE_MOTO=1 and no moto server started: {why}");
    }
    eprintln!("SKIPPED {test}: no moto server ({why}); `pip install 'moto[server]'` runs it");
    None
}

fn try_start(program: &PathBuf, env: &[(&str, &str)]) -> Result<Moto, String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let mut child = Command::new(program)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited at once ({status})"));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(Moto { child, endpoint: format!("http://127.0.0.1:{port}"), port });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err("did not listen within 30 s".into())
}

impl Moto {
    /// One plain HTTP request (moto does not check signatures unless told to): the status
    /// and the body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.request_with(method, path, &[], body)
    }

    /// [`Moto::request`] with more headers.
    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let more: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("moto answers");
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             {more}Connection: close\r\n\r\n",
            self.port,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("moto's answer");
        let text_end = answer.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let status_line = String::from_utf8_lossy(&answer[..text_end]).into_owned();
        let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap();
        (status, answer[text_end + 4..].to_vec())
    }

    /// Creates `bucket`.
    pub fn bucket(&self, bucket: &str) {
        let (status, body) = self.request("PUT", &format!("/{bucket}"), b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Puts `bytes` at `bucket/key`, a new object (moto lets no anonymous request replace
    /// one).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let (status, body) = self.request("PUT", &format!("/{bucket}/{key}"), bytes);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// The keys of the objects in `bucket` under `prefix` (from moto's XML listing).
    #[allow(dead_code)]
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{bucket}?prefix={prefix}"), b"");
        assert_eq!(status, 200);
        let text = String::from_utf8_lossy(&body);
        text.split("<Key>")
            .skip(1)
            .filter_map(|k| k.split("</Key>").next())
            .map(str::to_owned)
            .collect()
    }

    /// The multipart uploads in progress in `bucket` (moto's XML listing).
    pub fn uploads(&self, bucket: &str) -> String {
        let (status, body) = self.request("GET", &format!("/{bucket}?uploads"), b"");
        assert_eq!(status, 200);
        String::from_utf8_lossy(&body).into_owned()
    }
}
