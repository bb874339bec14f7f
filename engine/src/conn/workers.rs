//! Worker processes. A process may hold no more sockets than its RLIMIT_NOFILE, and raising
//! the hard limit needs CAP_SYS_RESOURCE (a container may lack it: here the hard limit is
//! 20000). So the connection tools fork workers, each with its own share of the connections and
//! its own descriptor table, and merge their JSON results.
//!
//! Owns: fork, the result pipes, the release pipes of the hold barrier, waiting. Never decides
//! what a worker does.

use crate::sys;

/// A forked worker: its pid, the read end of its result pipe, the write end of its release pipe.
pub struct Worker {
    pub pid: libc::pid_t,
    result_rd: i32,
    release_wr: i32,
}

fn pipe() -> Result<(i32, i32), String> {
    let mut p = [0i32; 2];
    // SAFETY: p is valid for two ints.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(format!("pipe: {}", sys::last_err()));
    }
    Ok((p[0], p[1]))
}

/// Fork `n` workers; worker i runs `f(i, release_fd)` and its JSON goes back to the parent.
/// `release_fd` becomes readable when the parent calls [`release`]. Call before any thread
/// is started (fork copies only the calling thread).
pub fn spawn<F>(n: usize, f: F) -> Result<Vec<Worker>, String>
where
    F: Fn(usize, i32) -> Result<serde_json::Value, String>,
{
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (rrd, rwr) = pipe()?;
        let (lrd, lwr) = pipe()?;
        // SAFETY: single-threaded here; the child only runs f and exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", sys::last_err()));
        }
        if pid == 0 {
            // SAFETY: closing our copies of the parent's ends.
            unsafe {
                libc::close(rrd);
                libc::close(lwr);
            }
            for w in &out {
                let w: &Worker = w;
                // SAFETY: the earlier workers' parent-side ends are not ours to keep.
                unsafe {
                    libc::close(w.result_rd);
                    libc::close(w.release_wr);
                }
            }
            let doc = match f(i, lrd) {
                Ok(v) => v,
                Err(e) => serde_json::json!({"error": e}),
            };
            let text = doc.to_string();
            let mut off = 0;
            let b = text.as_bytes();
            while off < b.len() {
                // SAFETY: b[off..] is valid for reading.
                let w = unsafe {
                    libc::write(rwr, b[off..].as_ptr() as *const libc::c_void, b.len() - off)
                };
                if w <= 0 {
                    break;
                }
                off += w as usize;
            }
            // SAFETY: leave without running the parent's destructors or atexit handlers.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: the child's ends.
        unsafe {
            libc::close(rwr);
            libc::close(lrd);
        }
        out.push(Worker {
            pid,
            result_rd: rrd,
            release_wr: lwr,
        });
    }
    Ok(out)
}

/// Let every worker waiting on its release fd go on.
pub fn release(ws: &[Worker]) {
    for w in ws {
        // SAFETY: one byte from a static buffer.
        unsafe { libc::write(w.release_wr, b"g".as_ptr() as *const libc::c_void, 1) };
    }
}

/// True while the worker has not exited.
pub fn alive(w: &Worker) -> bool {
    let mut st = 0;
    // SAFETY: plain syscall; WNOHANG does not reap a running child.
    let r = unsafe { libc::waitpid(w.pid, &mut st, libc::WNOHANG) };
    r == 0
}

/// Read every worker's JSON (in order) and reap it.
pub fn collect(ws: Vec<Worker>) -> Vec<serde_json::Value> {
    let mut docs = Vec::with_capacity(ws.len());
    for w in ws {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            // SAFETY: chunk is valid for writing.
            let n = unsafe {
                libc::read(
                    w.result_rd,
                    chunk.as_mut_ptr() as *mut libc::c_void,
                    chunk.len(),
                )
            };
            if n > 0 {
                buf.extend_from_slice(&chunk[..n as usize]);
            } else if n == 0 || sys::last_err().raw_os_error() != Some(libc::EINTR) {
                break; // end of the pipe, or an error other than an interrupted read
            }
        }
        // SAFETY: our fds.
        unsafe {
            libc::close(w.result_rd);
            libc::close(w.release_wr);
            let mut st = 0;
            libc::waitpid(w.pid, &mut st, 0);
        }
        docs.push(serde_json::from_slice(&buf).unwrap_or_else(
            |_| serde_json::json!({"error": format!("worker {} printed no result", w.pid)}),
        ));
    }
    docs
}

/// Workers needed for `count` descriptors when each process may hold `limit` (minus a margin).
pub fn needed(count: u64, limit: u64) -> usize {
    let per = limit.saturating_sub(256).max(1);
    count.div_ceil(per).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_needed() {
        assert_eq!(needed(1000, 20000), 1);
        assert_eq!(needed(19744, 20000), 1);
        assert_eq!(needed(19745, 20000), 2);
        assert_eq!(needed(500_000, 20000), 26);
        assert_eq!(needed(10, 100), 10);
    }

    #[test]
    fn fork_and_collect() {
        let ws = spawn(3, |i, _| Ok(serde_json::json!({"i": i}))).unwrap();
        let docs = collect(ws);
        let got: Vec<u64> = docs.iter().map(|d| d["i"].as_u64().unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2]);
    }
}
