//! A lying object server on loopback: each request (one per connection) is answered by a
//! script the test gives, which may send endless bodies, redirect anywhere, or echo what the
//! client sent. It counts the body bytes the client actually took, so a test can tell a
//! client that stopped reading from one that swallowed everything.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header lines, `name: value`, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// How to answer one request.
pub enum Answer {
    /// Status, extra header lines, and a body sent with its length.
    Full(u16, Vec<String>, Vec<u8>),
    /// Status and extra header lines, then `pattern` repeated without end (no length given:
    /// the body ends when the connection closes), until the client stops reading.
    Endless(u16, Vec<String>, Vec<u8>),
}

/// The running server (its thread ends with the test process).
pub struct Liar {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Every request seen, in order.
    pub seen: Arc<Mutex<Vec<Request>>>,
    /// Body bytes written to clients and accepted by their sockets.
    pub sent: Arc<AtomicU64>,
}

/// Starts a server answering each request with `script`.
pub fn start(script: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Liar {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let sent: Arc<AtomicU64> = Arc::default();
    let script = Arc::new(script);
    let (seen2, sent2) = (Arc::clone(&seen), Arc::clone(&sent));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (script, seen, sent) =
                (Arc::clone(&script), Arc::clone(&seen2), Arc::clone(&sent2));
            std::thread::spawn(move || {
                let _ = serve(client, &*script, &seen, &sent);
            });
        }
    });
    Liar { endpoint, seen, sent }
}

fn serve(
    client: TcpStream,
    script: &(dyn Fn(&Request) -> Answer + Send + Sync),
    seen: &Mutex<Vec<Request>>,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut out = client;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) =
            (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end_matches(['\r', '\n']);
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let request = Request { method, target, headers };
        let len: u64 = request.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        std::io::copy(&mut (&mut reader).take(len), &mut std::io::sink())?;
        seen.lock().unwrap().push(request.clone());
        match script(&request) {
            Answer::Full(status, head, body) => {
                write!(out, "HTTP/1.1 {status} X\r\n")?;
                for h in head {
                    write!(out, "{h}\r\n")?;
                }
                write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
                out.write_all(&body)?;
                sent.fetch_add(body.len() as u64, Ordering::Relaxed);
                out.flush()?;
            }
            Answer::Endless(status, head, pattern) => {
                write!(out, "HTTP/1.1 {status} X\r\n")?;
                for h in head {
                    write!(out, "{h}\r\n")?;
                }
                write!(out, "Connection: close\r\n\r\n")?;
                let chunk: Vec<u8> = pattern.iter().copied().cycle().take(64 << 10).collect();
                loop {
                    out.write_all(&chunk)?;
                    sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }
}
