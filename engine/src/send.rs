//! Sender driver: starts pinned sender threads, paces each one, counts what
//! the kernel accepted and builds the send result. Backends (`backend/`) do
//! the I/O; this module never builds packets itself.

use crate::backend::{BackendInfo, BackendOpts, TxContext};
use crate::frame::FrameSpec;
use crate::profile::{FlowMode, Profile};
use crate::rate::{self, Pacer, Rate};
use crate::result::{self, ProfileReport, SendResult, ThreadReport};
use crate::sys;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

/// Consecutive failed send calls after which a thread gives up.
const MAX_CONSECUTIVE_ERRORS: u64 = 200_000;

pub struct SendConfig {
    pub profile: Profile,
    pub backend: &'static BackendInfo,
    pub opts: BackendOpts,
    pub rate: Rate,
    pub duration_s: Option<f64>,
    pub count: Option<u64>,
    pub burst: u64,
    /// Catch-up limit [packets per thread]; None: catch up any lag.
    pub max_lag: Option<u64>,
    pub threads: usize,
    pub cpus: Option<Vec<usize>>,
    /// Busy-wait at most this long before a send time [ns]; the rest is slept.
    pub spin_ns: u64,
}

struct ThreadOut {
    report: ThreadReport,
    error_kinds: BTreeMap<String, u64>,
    first_error: Option<String>,
    end_ns: u64,
}

/// Packets thread `t` of `n` must send for a total of `total`.
fn share(total: u64, t: usize, n: usize) -> u64 {
    total / n as u64 + u64::from((t as u64) < total % n as u64)
}

impl SendConfig {
    /// Total intended packets (None: `max` rate until a deadline).
    pub fn intended_count(&self) -> Option<u64> {
        if let Some(c) = self.count {
            return Some(c);
        }
        match (self.rate, self.duration_s) {
            (Rate::Pps(p), Some(d)) => Some((p * d).round() as u64),
            _ => None,
        }
    }
}

pub fn run(cfg: SendConfig) -> Result<SendResult, String> {
    let n = cfg.threads.max(1);
    if let Some(c) = &cfg.cpus
        && c.len() != 1
        && c.len() != n
    {
        return Err(format!(
            "--cpu lists {} CPUs for {n} threads (give one or one per thread)",
            c.len()
        ));
    }
    let intended = cfg.intended_count();
    let cfg = Arc::new(cfg);
    let barrier = Arc::new(Barrier::new(n + 1));
    let open_errors: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(AtomicU64::new(0)); // 0: abort; else t0 (monotonic ns)
    let mut handles = Vec::new();
    for t in 0..n {
        let cfg = cfg.clone();
        let barrier = barrier.clone();
        let open_errors = open_errors.clone();
        let start = start.clone();
        let h = std::thread::Builder::new()
            .name(format!("fwlab-tx{t}"))
            .spawn(move || thread_main(&cfg, t, n, intended, &barrier, &open_errors, &start))
            .map_err(|e| format!("spawn: {e}"))?;
        handles.push(h);
    }
    barrier.wait(); // all backends opened (or failed)
    let errs = open_errors.lock().unwrap().clone();
    let started_unix_ns = rate::real_ns();
    let t0 = rate::mono_ns() + 1_000_000; // common start 1 ms from now
    if errs.is_empty() {
        start.store(t0, Ordering::SeqCst);
    }
    barrier.wait();
    let outs: Vec<Option<ThreadOut>> = handles
        .into_iter()
        .map(|h| h.join().expect("sender thread panicked"))
        .collect();
    if let Some(e) = errs.first() {
        return Err(e.clone());
    }
    let outs: Vec<ThreadOut> = outs.into_iter().flatten().collect();

    let offered: u64 = outs.iter().map(|o| o.report.sent).sum();
    let errors: u64 = outs.iter().map(|o| o.report.errors).sum();
    let lag_skipped: u64 = outs.iter().map(|o| o.report.lag_skipped).sum();
    let end = outs.iter().map(|o| o.end_ns).max().unwrap_or(t0);
    let elapsed_s = (end.saturating_sub(t0)).max(1) as f64 / 1e9;
    let achieved_pps = offered as f64 / elapsed_s;
    let mut error_kinds = BTreeMap::new();
    for o in &outs {
        for (k, v) in &o.error_kinds {
            *error_kinds.entry(k.clone()).or_insert(0) += v;
        }
    }
    let first_error = outs.iter().find_map(|o| o.first_error.clone());
    let short_rate = match cfg.rate {
        Rate::Pps(p) => achieved_pps < 0.99 * p,
        Rate::Max => false,
    };
    let generator_short = short_rate || intended.is_some_and(|i| offered < i);
    let p = &cfg.profile;
    let spec = FrameSpec::new(p.ipv6, p.proto, p.frame_size)?;
    Ok(SendResult {
        schema_version: result::SCHEMA_VERSION,
        kind: "send",
        engine_version: result::ENGINE_VERSION,
        backend: cfg.backend.name,
        profile: profile_report(p, &spec),
        intended_pps: cfg.rate.pps(),
        rate_max: cfg.rate == Rate::Max,
        burst: cfg.burst,
        max_lag: cfg.max_lag,
        spin_us: cfg.spin_ns / 1000,
        lag_skipped_count: lag_skipped,
        duration_s: cfg.duration_s,
        count: cfg.count,
        intended_count: intended,
        offered_count: offered,
        achieved_pps,
        elapsed_s,
        generator_short,
        errors,
        error_kinds,
        first_error,
        interrupted: sys::stopped(),
        threads: outs.into_iter().map(|o| o.report).collect(),
        cpu_pinning: cfg
            .cpus
            .as_ref()
            .map(|c| (0..n).map(|t| c[t % c.len()]).collect()),
        started_unix_ns,
        clocks: result::CLOCKS,
    })
}

pub fn profile_report(p: &Profile, spec: &FrameSpec) -> ProfileReport {
    ProfileReport {
        proto: p.proto.name(),
        ipv6: p.ipv6,
        frame_size: p.frame_size,
        wire_bytes: spec.wire_len(),
        payload_bytes: spec.payload_len(),
        header_layout: spec.layout().map(|l| l.name()),
        src: p.src.map(|s| s.describe()),
        dst: p.dst.describe(),
        src_port: p.src_port.describe(),
        dst_port: p.dst_port.describe(),
        flow_mode: match p.flow_mode {
            FlowMode::Increment => "increment",
            FlowMode::Random => "random",
        },
        seed: p.seed,
        stream_id: p.stream_id,
    }
}

fn thread_main(
    cfg: &SendConfig,
    t: usize,
    n: usize,
    intended: Option<u64>,
    barrier: &Barrier,
    open_errors: &Mutex<Vec<String>>,
    start: &AtomicU64,
) -> Option<ThreadOut> {
    let cpu = cfg.cpus.as_ref().map(|c| c[t % c.len()]);
    let mut pinned = false;
    if let Some(c) = cpu {
        match sys::pin_to_cpu(c) {
            Ok(()) => pinned = true,
            Err(e) => open_errors
                .lock()
                .unwrap()
                .push(format!("pin thread {t} to CPU {c}: {e}")),
        }
    }
    rate::tight_timer_slack();
    let stream = cfg.profile.stream_id.wrapping_add(t as u16);
    let cx = TxContext {
        profile: &cfg.profile,
        opts: &cfg.opts,
        stream,
        thread: t,
        threads: n,
    };
    let backend = match (cfg.backend.open)(&cx) {
        Ok(b) => Some(b),
        Err(e) => {
            open_errors.lock().unwrap().push(e);
            None
        }
    };
    barrier.wait();
    barrier.wait();
    let t0 = start.load(Ordering::SeqCst);
    let mut be = backend?;
    if t0 == 0 {
        return None;
    }

    let my_total = intended.map(|i| share(i, t, n));
    let total = my_total.unwrap_or(u64::MAX);
    // A paced sender a few batches behind at the end may finish its count
    // within 1 % of the duration (its achieved rate then still shows the lag);
    // `max` stops exactly at the duration.
    let grace = if cfg.rate == Rate::Max { 1.0 } else { 1.01 };
    let deadline = cfg
        .duration_s
        .map(|d| t0 + (d * grace * 1e9) as u64)
        .unwrap_or(u64::MAX);
    let pacer = Pacer::new(t0, cfg.rate.split(n), cfg.burst, total);
    let max_lag = match cfg.rate {
        Rate::Pps(_) => cfg.max_lag.map(|l| l.max(cfg.burst)),
        Rate::Max => None,
    };
    let batch = be.max_batch() as u64;
    let mut sent = 0u64;
    let mut skipped = 0u64;
    let mut errors = 0u64;
    let mut consecutive = 0u64;
    let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_error = None;
    rate::wait_until(t0);
    while sent + skipped < total {
        let now = rate::mono_ns();
        if now >= deadline || sys::stopped() {
            break;
        }
        let allowed = pacer.allowed(now);
        skipped = rate::lag_skipped(allowed, sent, skipped, max_lag);
        let allowed = allowed.saturating_sub(skipped);
        if allowed <= sent {
            rate::wait_until_spin(
                pacer.release_time(sent + skipped).min(deadline),
                cfg.spin_ns,
            );
            continue;
        }
        let want = (allowed - sent).min(batch) as usize;
        match be.send(sent, want, rate::real_ns()) {
            Ok(k) if k > 0 => {
                sent += k as u64;
                consecutive = 0;
            }
            Ok(_) => {
                consecutive += 1;
                std::hint::spin_loop();
            }
            Err(e) => {
                errors += 1;
                consecutive += 1;
                *error_kinds.entry(result::errno_name(&e)).or_insert(0) += 1;
                if first_error.is_none() {
                    first_error = Some(e.to_string());
                }
                if matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) {
                    std::thread::yield_now();
                }
            }
        }
        if consecutive >= MAX_CONSECUTIVE_ERRORS {
            first_error.get_or_insert_with(|| "send made no progress".into());
            break;
        }
    }
    // A paced run that sent everything ends at its scheduled window end
    // (count / rate), so bursts or an early last packet do not inflate the rate.
    let mut end_ns = rate::mono_ns();
    if let (Rate::Pps(p), Some(tot)) = (cfg.rate.split(n), my_total)
        && sent == tot
    {
        end_ns = end_ns.max(t0 + (tot as f64 * 1e9 / p) as u64);
    }
    let el = (end_ns - t0).max(1) as f64 / 1e9;
    Some(ThreadOut {
        report: ThreadReport {
            thread: t,
            stream_id: stream,
            cpu,
            pinned,
            cpu_observed: sys::current_cpu(),
            intended_count: my_total,
            sent,
            lag_skipped: skipped,
            errors,
            elapsed_s: el,
            achieved_pps: sent as f64 / el,
            backend_info: be.info(),
        },
        error_kinds,
        first_error,
        end_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for total in [0u64, 1, 7, 1000, 1001] {
            for n in 1..5 {
                assert_eq!((0..n).map(|t| share(total, t, n)).sum::<u64>(), total);
            }
        }
    }
}
