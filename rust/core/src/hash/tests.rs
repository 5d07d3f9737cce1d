use super::*;

#[test]
fn spans_hash_like_one_by_one() {
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut spans = Vec::new();
    let mut a = 0;
    for n in [0usize, 1, 63, 64, 65, 1000, 30_000, 5, 68_802] {
        spans.push((a, a + n));
        a += n;
    }
    let want: Vec<[u8; 32]> = spans.iter().map(|&(a, b)| sha256(&data[a..b])).collect();
    for threads in [1, 2, 3, 8, 100] {
        assert_eq!(sha256_spans(&data, &spans, threads), want);
    }
    assert!(sha256_spans(&data, &[], 2).is_empty());
    assert_eq!(span_threads(256 * 1024 - 1), 1);
    assert!((1..=4).contains(&span_threads(1 << 30)));
}

#[test]
fn stream_hash_equals_one_shot() {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 256) as u8).collect();
    for chunk in [1usize, 63, 64, 4096, 70_000, 300_000] {
        let mut h = StreamHasher::new();
        let mut parts = data.chunks(chunk).collect::<Vec<_>>();
        let last = parts.pop().unwrap_or(&[]);
        for p in parts {
            let mut buf = h.push(p.to_vec(), 16);
            assert!(buf.is_empty());
            buf.push(1); // a reused buffer is the caller's to fill
        }
        assert_eq!(h.finish(last).map(|r| r.0), Some(sha256(&data)));
    }
    let abc = StreamHasher::new().finish(b"abc").map(|r| r.0);
    assert_eq!(abc, Some(sha256(b"abc")));
    // dropped unfinished: the worker starts clean for the next stream
    let mut abandoned = StreamHasher::new();
    drop(abandoned.push(vec![1, 2, 3], 16));
    drop(abandoned);
    let mut next = StreamHasher::new();
    drop(next.push(b"ab".to_vec(), 16));
    assert_eq!(next.finish(b"c").map(|r| r.0), Some(sha256(b"abc")));
    // two streams at once: the second hashes inline
    let (mut one, mut two) = (StreamHasher::new(), StreamHasher::new());
    drop(one.push(b"xy".to_vec(), 16));
    drop(two.push(b"ab".to_vec(), 16));
    assert_eq!(two.finish(b"c").map(|r| r.0), Some(sha256(b"abc")));
    assert_eq!(one.finish(b"z").map(|r| r.0), Some(sha256(b"xyz")));
}

#[test]
fn prefix_states_hash_exactly() {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let mut p = PrefixStates::new(1 << 20);
    for (n, stable) in [
        (5_000usize, 4_000usize),
        (5_000, 4_000), // repeat: from the stored state
        (9_000, 8_500), // grown
        (9_000, 8_500),
        (7_000, 6_999),   // shorter than stored: an earlier entry fits
        (3_000, 500),     // too short to store
        (20_000, 20_000), // all stable
        (100, 64),
    ] {
        assert_eq!(p.sha256(&data[..n], stable), sha256(&data[..n]));
    }
    // same first bytes, different prefixes
    let mut other = data.clone();
    other[2_000] ^= 1;
    assert_eq!(p.sha256(&other[..9_000], 8_500), sha256(&other[..9_000]));
    assert_eq!(p.sha256(&data[..9_000], 8_500), sha256(&data[..9_000]));
    // the bound holds
    let mut small = PrefixStates::new(10_000);
    for k in 0..50u8 {
        let mut d = data[..6_000].to_vec();
        d[0] = k;
        assert_eq!(small.sha256(&d, 6_000), sha256(&d));
        assert!(small.held_bytes() <= 10_000);
    }
}

#[test]
fn known_digests() {
    assert_eq!(
        hex(&sha256(b"")),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex(&sha256(b"abc")),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
