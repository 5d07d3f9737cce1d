//! A batch of stored payloads decoded in order, a second thread reading
//! ahead: parsing, checking and hashing (pure work) run beside the caller,
//! who builds the host's values from each result as it arrives.

use std::sync::mpsc::sync_channel;

use super::{decode_item, Decoded};

/// Results handed over at a time (enough to amortise the channel, small
/// enough that the caller starts at once).
const CHUNK: usize = 64;
/// Chunks decoded ahead of the caller at most.
const AHEAD: usize = 16;
/// Smaller batches are decoded on the calling thread (a thread costs tens
/// of microseconds to start; an item about two).
pub const AHEAD_MIN: usize = 256;

/// Decode `payloads[i]` as event `seqs[i]` for each `i` in order and hand
/// each result to `take` (on the calling thread) until the first failure,
/// inclusive, or until `take` returns `false`. With `ahead` (and at least
/// `AHEAD_MIN` payloads), a scoped thread decodes the next chunks while
/// `take` runs; the results are the same.
pub fn decode_batch<'a, F>(payloads: &[&'a str], seqs: &[i64], ahead: bool, mut take: F)
where
    F: FnMut(usize, Result<Decoded<'a>, String>) -> bool,
{
    let n = payloads.len().min(seqs.len());
    if !ahead || n < AHEAD_MIN {
        for i in 0..n {
            let result = decode_item(payloads[i], seqs[i]);
            let failed = result.is_err();
            if !take(i, result) || failed {
                return;
            }
        }
        return;
    }
    let (tx, rx) = sync_channel::<Vec<Result<Decoded<'a>, String>>>(AHEAD);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for start in (0..n).step_by(CHUNK) {
                let mut chunk = Vec::with_capacity(CHUNK);
                let mut failed = false;
                for i in start..(start + CHUNK).min(n) {
                    let result = decode_item(payloads[i], seqs[i]);
                    failed = result.is_err();
                    chunk.push(result);
                    if failed {
                        break;
                    }
                }
                // A closed channel: the caller stopped taking.
                if tx.send(chunk).is_err() || failed {
                    return;
                }
            }
        });
        let mut i = 0;
        'taking: for chunk in rx.iter() {
            for result in chunk {
                let failed = result.is_err();
                if !take(i, result) || failed {
                    break 'taking;
                }
                i += 1;
            }
        }
        // Dropping the receiver here ends a reader blocked on a full channel.
        drop(rx);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(i: usize) -> String {
        format!("{{\"item\":{{\"content\":\"m{i}\",\"trust\":\"platform\",\"type\":\"system_message\"}}}}")
    }

    fn run(
        payloads: &[&str],
        ahead: bool,
        stop_at: Option<usize>,
    ) -> Vec<(usize, Result<String, String>)> {
        let seqs: Vec<i64> = (1..=payloads.len() as i64).collect();
        let mut got = Vec::new();
        decode_batch(payloads, &seqs, ahead, |i, r| {
            got.push((
                i,
                r.map(|d| String::from_utf8(d.cache.unwrap().0.to_vec()).unwrap()),
            ));
            Some(i) != stop_at
        });
        got
    }

    #[test]
    fn reading_ahead_gives_the_same_results_in_order_and_stops_at_the_first_failure() {
        let texts: Vec<String> = (0..1000).map(payload).collect();
        let mut payloads: Vec<&str> = texts.iter().map(String::as_str).collect();
        let all = run(&payloads, false, None);
        assert_eq!(all.len(), 1000);
        assert_eq!(run(&payloads, true, None), all);
        assert!(all
            .iter()
            .enumerate()
            .all(|(k, (i, r))| k == *i && r.is_ok()));
        for bad in [0, 63, 64, 500, 999] {
            payloads[bad] = "{}";
            let serial = run(&payloads, false, None);
            assert_eq!(serial.len(), bad + 1);
            assert!(serial[bad].1.is_err());
            assert_eq!(run(&payloads, true, None), serial);
            payloads[bad] = &texts[bad];
        }
        for stop in [0, 10, 64, 700] {
            let serial = run(&payloads, false, Some(stop));
            assert_eq!(serial.len(), stop + 1);
            assert_eq!(run(&payloads, true, Some(stop)), serial);
        }
    }
}
