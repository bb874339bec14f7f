//! Pacing and clocks. The pacer is a pure schedule: packet i (counted in
//! bursts of `burst`) may leave at `t0 + floor(i / burst) * burst / rate`.
//! Senders ask how many packets the schedule allows by now and send that many
//! (capped by the batch size); being late is caught up, so the long-run rate
//! equals the intended one unless the generator cannot keep up.
//! Owns time only; never touches sockets.

/// Intended rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// As fast as the backend goes.
    Max,
    /// Packets per second.
    Pps(f64),
}

impl Rate {
    pub fn parse(s: &str) -> Result<Rate, String> {
        let s = s.trim();
        if s == "max" {
            return Ok(Rate::Max);
        }
        let (num, mult) = match s.char_indices().last() {
            Some((i, 'k')) | Some((i, 'K')) => (&s[..i], 1e3),
            Some((i, 'm')) | Some((i, 'M')) => (&s[..i], 1e6),
            _ => (s, 1.0),
        };
        let v: f64 = num
            .parse()
            .map_err(|_| format!("bad rate '{s}' (pps number, 100k, 1.5M or max)"))?;
        let v = v * mult;
        if !(v.is_finite() && v >= 1.0) {
            return Err(format!("rate '{s}' must be at least 1 pps"));
        }
        Ok(Rate::Pps(v))
    }

    pub fn pps(&self) -> Option<f64> {
        match self {
            Rate::Max => None,
            Rate::Pps(p) => Some(*p),
        }
    }

    /// This rate split over `n` threads.
    pub fn split(&self, n: usize) -> Rate {
        match self {
            Rate::Max => Rate::Max,
            Rate::Pps(p) => Rate::Pps(p / n as f64),
        }
    }
}

#[inline(always)]
fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC [ns]: pacing and elapsed times.
#[inline(always)]
pub fn mono_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME [ns]: test-header timestamps (kernel receive timestamps use it too).
#[inline(always)]
pub fn real_ns() -> u64 {
    now(libc::CLOCK_REALTIME)
}

/// Make this thread's sleeps precise (timer slack 1 ns instead of 50 us).
pub fn tight_timer_slack() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Default busy-wait before a send time [ns] (see `wait_until_spin`).
pub const SPIN_NS: u64 = 60_000;

/// Sleep (coarse) then spin (fine) until CLOCK_MONOTONIC reaches `t`.
pub fn wait_until(t: u64) {
    wait_until_spin(t, SPIN_NS)
}

/// Sleep until `spin_ns` before `t`, then spin until `t`. A small `spin_ns` leaves the CPU idle
/// between sends (a SCHED_FIFO thread busy for more than 95 % of a second is throttled by the
/// kernel's RT bandwidth limit, sched_rt_runtime_us), at the cost of trusting the timer's wake-up.
pub fn wait_until_spin(t: u64, spin_ns: u64) {
    loop {
        let n = mono_ns();
        if n >= t {
            return;
        }
        if t - n > spin_ns + 20_000 {
            let wake = t - spin_ns;
            let ts = libc::timespec {
                tv_sec: (wake / 1_000_000_000) as _,
                tv_nsec: (wake % 1_000_000_000) as _,
            };
            // SAFETY: valid timespec; EINTR simply loops.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The send schedule of one sender thread.
#[derive(Debug, Clone)]
pub struct Pacer {
    pub t0: u64,
    rate: Rate,
    burst: u64,
    /// Packets to send in total (u64::MAX: until the deadline).
    total: u64,
    /// ns per burst.
    burst_period: f64,
}

impl Pacer {
    pub fn new(t0: u64, rate: Rate, burst: u64, total: u64) -> Pacer {
        let burst = burst.max(1);
        let burst_period = match rate {
            Rate::Max => 0.0,
            Rate::Pps(p) => burst as f64 * 1e9 / p,
        };
        Pacer {
            t0,
            rate,
            burst,
            total,
            burst_period,
        }
    }

    /// Packets the schedule allows to have left by time `now` (cumulative).
    #[inline]
    pub fn allowed(&self, now: u64) -> u64 {
        match self.rate {
            Rate::Max => self.total,
            Rate::Pps(_) => {
                let el = now.saturating_sub(self.t0) as f64;
                let bursts = (el / self.burst_period).floor() as u64 + 1;
                bursts.saturating_mul(self.burst).min(self.total)
            }
        }
    }

    /// Earliest time packet number `i` may leave.
    #[inline]
    pub fn release_time(&self, i: u64) -> u64 {
        match self.rate {
            Rate::Max => self.t0,
            Rate::Pps(_) => self.t0 + ((i / self.burst) as f64 * self.burst_period).ceil() as u64,
        }
    }
}

/// Catch-up limit: given the schedule's cumulative `allowed`, packets `sent` and
/// `skipped` so far, the new skipped total so that the sender is never more than
/// `max_lag` packets behind (None: never skip).
#[inline]
pub fn lag_skipped(allowed: u64, sent: u64, skipped: u64, max_lag: Option<u64>) -> u64 {
    match max_lag {
        Some(lag) => skipped.max(allowed.saturating_sub(sent + lag)),
        None => skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_cap_skips_only_beyond_the_limit() {
        assert_eq!(lag_skipped(100, 90, 0, Some(64)), 0);
        assert_eq!(lag_skipped(1000, 90, 0, Some(64)), 846);
        // already skipped enough: unchanged, never decreases
        assert_eq!(lag_skipped(1000, 90, 900, Some(64)), 900);
        assert_eq!(lag_skipped(1_000_000, 0, 0, None), 0);
    }

    #[test]
    fn parse_rates() {
        assert_eq!(Rate::parse("max").unwrap(), Rate::Max);
        assert_eq!(Rate::parse("100k").unwrap(), Rate::Pps(100_000.0));
        assert_eq!(Rate::parse("1.5M").unwrap(), Rate::Pps(1_500_000.0));
        assert_eq!(Rate::parse("2500").unwrap(), Rate::Pps(2500.0));
        assert!(Rate::parse("0").is_err());
        assert!(Rate::parse("fast").is_err());
    }

    #[test]
    fn schedule_is_exact() {
        let p = Pacer::new(1000, Rate::Pps(1000.0), 1, 10);
        assert_eq!(p.allowed(1000), 1);
        assert_eq!(p.allowed(1000 + 999_999), 1);
        assert_eq!(p.allowed(1000 + 1_000_000), 2);
        assert_eq!(p.allowed(1000 + 5_000_000_000), 10);
        assert_eq!(p.release_time(3), 1000 + 3_000_000);
    }

    #[test]
    fn bursts_release_together() {
        let p = Pacer::new(0, Rate::Pps(1000.0), 100, u64::MAX);
        assert_eq!(p.allowed(0), 100);
        assert_eq!(p.allowed(99_999_999), 100);
        assert_eq!(p.allowed(100_000_000), 200);
        assert_eq!(p.release_time(150), 100_000_000);
    }

    #[test]
    fn paced_loop_hits_rate_within_one_percent() {
        // 20 ms at 50 kpps with batches of 32: count and elapsed time must agree.
        let rate = 50_000.0;
        let total = 1000;
        let t0 = mono_ns();
        let p = Pacer::new(t0, Rate::Pps(rate), 1, total);
        let mut sent = 0;
        while sent < total {
            let due = p.allowed(mono_ns()) - sent;
            if due == 0 {
                wait_until(p.release_time(sent));
                continue;
            }
            sent += due.min(32);
        }
        let el = (mono_ns() - t0) as f64 / 1e9;
        let expect = (total - 1) as f64 / rate;
        assert!(el >= expect * 0.999, "too fast: {el}");
        assert!(el < expect * 1.5 + 0.005, "too slow: {el}");
    }
}
