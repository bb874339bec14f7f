//! The delay line's queue: frames held in arrival order until `arrival + delay`, bounded in
//! frames and bytes (tail drop, counted). Pure timing and bookkeeping; never touches sockets
//! or clocks (every call takes the time), so it is tested without a network.

use std::collections::VecDeque;

/// One held frame: when it may leave [ns, CLOCK_MONOTONIC] and its bytes (as read from the
/// socket: the virtio-net header the socket adds, then the Ethernet frame).
pub struct Held {
    pub due_ns: u64,
    /// bytes counted against the byte bound (the frame, without the socket's header)
    pub frame_len: usize,
    pub buf: Vec<u8>,
}

/// Counters of one queue since it was made.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueueCounters {
    /// frames taken in
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    /// frames given out (to be sent)
    pub released: u64,
    /// frames refused because the queue was full (frames or bytes bound)
    pub tail_drops: u64,
    pub tail_drop_bytes: u64,
    /// most frames / bytes held at once
    pub max_frames: usize,
    pub max_bytes: usize,
}

/// FIFO with a fixed delay. Order is arrival order: with one delay for every frame, the head
/// is always the frame due first.
pub struct DelayQueue {
    delay_ns: u64,
    limit_frames: usize,
    limit_bytes: usize,
    q: VecDeque<Held>,
    bytes: usize,
    /// buffers of released frames, reused for new ones (no allocation in steady state)
    pool: Vec<Vec<u8>>,
    pub counters: QueueCounters,
}

impl DelayQueue {
    pub fn new(delay_ns: u64, limit_frames: usize, limit_bytes: usize) -> DelayQueue {
        DelayQueue {
            delay_ns,
            limit_frames: limit_frames.max(1),
            limit_bytes: limit_bytes.max(1),
            q: VecDeque::new(),
            bytes: 0,
            pool: Vec::new(),
            counters: QueueCounters::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Take a frame that arrived at `arrival_ns`. `data` is what is sent later unchanged;
    /// `frame_len` its size counted against the byte bound. False (and counted) when full.
    pub fn push(&mut self, arrival_ns: u64, data: &[u8], frame_len: usize) -> bool {
        if self.q.len() >= self.limit_frames || self.bytes + frame_len > self.limit_bytes {
            self.counters.tail_drops += 1;
            self.counters.tail_drop_bytes += frame_len as u64;
            return false;
        }
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.q.push_back(Held {
            due_ns: arrival_ns + self.delay_ns,
            frame_len,
            buf,
        });
        self.bytes += frame_len;
        self.counters.enqueued += 1;
        self.counters.enqueued_bytes += frame_len as u64;
        self.counters.max_frames = self.counters.max_frames.max(self.q.len());
        self.counters.max_bytes = self.counters.max_bytes.max(self.bytes);
        true
    }

    /// When the head may leave (None: empty).
    pub fn next_due(&self) -> Option<u64> {
        self.q.front().map(|h| h.due_ns)
    }

    /// How many frames from the head are due at `now_ns`, at most `max`.
    pub fn due_count(&self, now_ns: u64, max: usize) -> usize {
        self.q
            .iter()
            .take(max)
            .take_while(|h| h.due_ns <= now_ns)
            .count()
    }

    /// The i-th frame from the head (to hand its bytes to the kernel before releasing it).
    pub fn peek(&self, i: usize) -> Option<&Held> {
        self.q.get(i)
    }

    /// Remove the head (sent, or dropped by the caller); its buffer goes back to the pool.
    /// Returns its due time.
    pub fn release(&mut self) -> Option<u64> {
        let h = self.q.pop_front()?;
        self.bytes -= h.frame_len;
        self.counters.released += 1;
        let due = h.due_ns;
        if self.pool.len() < 4096 {
            self.pool.push(h.buf);
        }
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn q(delay_ms: u64) -> DelayQueue {
        DelayQueue::new(delay_ms * MS, 1000, 1 << 20)
    }

    #[test]
    fn a_frame_is_due_exactly_delay_after_its_arrival() {
        let mut d = q(5);
        assert!(d.push(100 * MS, b"a", 1));
        assert_eq!(d.next_due(), Some(105 * MS));
        assert_eq!(d.due_count(105 * MS - 1, 64), 0);
        assert_eq!(d.due_count(105 * MS, 64), 1);
        assert_eq!(d.release(), Some(105 * MS));
        assert!(d.is_empty() && d.next_due().is_none());
    }

    #[test]
    fn frames_leave_in_arrival_order_only_when_each_is_due() {
        let mut d = q(5);
        for (i, t) in [0u64, 1, 2, 10].iter().enumerate() {
            assert!(d.push(t * MS, &[i as u8], 1));
        }
        // at 6 ms the frames that arrived at 0 and 1 ms are due, not the one of 2 ms
        assert_eq!(d.due_count(6 * MS, 64), 2);
        assert_eq!(d.due_count(6 * MS, 1), 1); // the batch bound holds
        let mut out = vec![];
        while d.due_count(7 * MS, 64) > 0 {
            out.push(d.peek(0).unwrap().buf[0]);
            d.release();
        }
        assert_eq!(out, vec![0, 1, 2]);
        assert_eq!(d.next_due(), Some(15 * MS));
        assert_eq!(d.due_count(14 * MS, 64), 0);
    }

    #[test]
    fn the_frame_bound_tail_drops_and_counts() {
        let mut d = DelayQueue::new(MS, 2, 1 << 20);
        assert!(d.push(0, b"x", 60));
        assert!(d.push(0, b"y", 60));
        assert!(!d.push(0, b"z", 60));
        assert_eq!(d.counters.tail_drops, 1);
        assert_eq!(d.counters.tail_drop_bytes, 60);
        assert_eq!(d.counters.max_frames, 2);
        d.release();
        assert!(d.push(0, b"z", 60)); // room again once the head left
        assert_eq!(d.peek(1).unwrap().buf, b"z");
    }

    #[test]
    fn the_byte_bound_tail_drops_and_counts() {
        let mut d = DelayQueue::new(MS, 100, 3000);
        assert!(d.push(0, &[0; 10], 1500));
        assert!(d.push(0, &[0; 10], 1500));
        assert!(!d.push(0, &[0; 10], 64));
        assert_eq!((d.counters.tail_drops, d.bytes(), d.counters.max_bytes), (1, 3000, 3000));
        d.release();
        assert_eq!(d.bytes(), 1500);
        assert!(d.push(0, &[0; 10], 64));
    }

    #[test]
    fn counters_add_up_and_buffers_are_reused() {
        let mut d = q(1);
        for i in 0..10u64 {
            d.push(i * MS, &[1, 2, 3], 3);
        }
        let mut released = 0;
        while d.due_count(100 * MS, 64) > 0 {
            d.release();
            released += 1;
        }
        assert_eq!(released, 10);
        let c = &d.counters;
        assert_eq!((c.enqueued, c.released, c.enqueued_bytes), (10, 10, 30));
        assert_eq!(d.pool.len(), 10);
        d.push(200 * MS, &[9], 1);
        assert_eq!(d.pool.len(), 9); // taken from the pool, not allocated
        assert_eq!(d.peek(0).unwrap().buf, vec![9]);
    }
}
