//! A program run in a real pseudo-terminal, as a person runs it: its
//! stdin, stdout and stderr are the terminal, it is the terminal's
//! foreground process (so Ctrl-C is a SIGINT from the terminal), and the
//! test reads what it writes and types at it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::pty::{Winsize, openpty};

/// Ctrl-C and Ctrl-D as typed.
pub(crate) const CTRL_C: &[u8] = b"\x03";
pub(crate) const CTRL_D: &[u8] = b"\x04";

/// What the terminal has shown so far (every byte, escapes included).
type Screen = Arc<(Mutex<Vec<u8>>, Condvar)>;

/// A child process on a pseudo-terminal.
pub(crate) struct Terminal {
    child: Child,
    input: File,
    screen: Screen,
    /// How much of the [`plain`] screen [`Terminal::expect`] matched.
    seen: usize,
}

impl Terminal {
    /// Starts `command` on a new 40 × 200 terminal.
    pub(crate) fn spawn(mut command: Command) -> Self {
        let size = Winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(&size, None).expect("openpty");
        let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the terminal"));
        command
            .stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // A session of its own, with the terminal as its
                // controlling terminal: it is the foreground process.
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if libc::ioctl(0, libc::TIOCSCTTY as _, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("start the program on the terminal");
        drop(pty.slave);
        let master = File::from(pty.master);
        let input = master.try_clone().expect("dup the terminal");
        let screen: Screen = Arc::default();
        let shown = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut master = master;
            let mut buf = [0u8; 8192];
            // Ends when the program exits (EIO on the master).
            while let Ok(n @ 1..) = master.read(&mut buf) {
                let (bytes, arrived) = &*shown;
                bytes.lock().unwrap().extend_from_slice(&buf[..n]);
                arrived.notify_all();
            }
        });
        Self {
            child,
            input,
            screen,
            seen: 0,
        }
    }

    /// Types `bytes`.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.input.write_all(bytes).expect("type at the terminal");
        self.input.flush().expect("type at the terminal");
    }

    /// Types `line` and Enter.
    pub(crate) fn line(&mut self, line: &str) {
        self.send(format!("{line}\r").as_bytes());
    }

    /// Waits until the screen shows `text` after what earlier calls
    /// matched; returns the screen from there to the end of `text`. The
    /// screen is read as [`plain`] text. Panics after `within`, showing the
    /// screen.
    pub(crate) fn expect(&mut self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let (bytes, arrived) = &*self.screen;
        let mut shown = bytes.lock().unwrap();
        loop {
            let screen = plain(&String::from_utf8_lossy(&shown));
            let fresh = screen.get(self.seen..).unwrap_or_default();
            if let Some(at) = fresh.find(text) {
                let matched = fresh[..at + text.len()].to_string();
                self.seen += matched.len();
                return matched;
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "the terminal did not show {text:?} within {within:?}; it shows:\n{fresh}"
            );
            shown = arrived.wait_timeout(shown, deadline - now).unwrap().0;
        }
    }

    /// Everything shown since the last match.
    pub(crate) fn rest(&self) -> String {
        let shown = self.screen.0.lock().unwrap();
        let screen = plain(&String::from_utf8_lossy(&shown));
        screen.get(self.seen..).unwrap_or_default().to_string()
    }

    /// CPU time (user + system) the program has used so far.
    pub(crate) fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("read the program's CPU time");
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .expect("stat format")
            .1
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }

    /// Waits for the program to exit (killed after `within`).
    pub(crate) fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the program") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "the program did not exit within {within:?}; the terminal shows:\n{}",
                    self.rest()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` without terminal escape sequences (CSI `ESC [ ... letter`), with
/// `\r\n` as `\n` and a lone `\r` (back to the start of the line, as the
/// progress line and the line editor redraw) as `\n` too.
pub(crate) fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() || c == '~' {
                            break;
                        }
                    }
                }
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push('\n'),
            c => out.push(c),
        }
    }
    out
}
