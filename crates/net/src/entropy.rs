//! What a stranger on the fabric must guess: the runtime's QPNs, start
//! PSNs, RKeys and UD stream ids come from the kernel's CSPRNG (`getrandom(2)`), never
//! from an address or a counter. ReDMArk (USENIX Security 2021) injects into RoCE
//! connections whose QPNs and PSNs are predictable; with 24 random bits each, a blind
//! injection must hit one (QPN, PSN-window) pair in 2^48 (less the window). The simulator never calls this: its
//! runs stay seeded and reproducible.

/// `N` bytes from the kernel's CSPRNG, or why not. Blocks only before the kernel's
/// pool is initialised at boot.
pub fn try_random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    let mut filled = 0;
    while filled < N {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(b)
}

/// `N` bytes from the kernel's CSPRNG; a failure is a broken system, so it panics
/// with why.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    try_random_bytes().unwrap_or_else(|e| panic!("getrandom: {e}"))
}

/// A fresh UD multicast stream id (`ud_mcast`), drawn at every sender start, so a
/// restarted sender is a new stream and an off-path host cannot guess the id.
pub fn random_stream_id() -> std::io::Result<u32> {
    try_random_bytes().map(u32::from_be_bytes)
}

/// A random 24-bit start PSN.
pub fn random_psn() -> u32 {
    u32::from_be_bytes(random_bytes::<4>()) & 0x00ff_ffff
}

/// A random 24-bit QPN for a group connection: never one of the low QPNs (0, 1 and the
/// group's virtual remote live there) nor the overlay's 0x1_xxxx range, whose QPNs
/// name ranks.
pub fn random_qpn() -> u32 {
    loop {
        let q = random_psn();
        if q >= 0x100 && !(0x1_0000..=0x1_ffff).contains(&q) {
            return q;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qpns_are_24_bits_outside_the_reserved_ranges_and_vary() {
        let qs: std::collections::BTreeSet<u32> = (0..64).map(|_| random_qpn()).collect();
        assert!(qs
            .iter()
            .all(|&q| q <= 0xff_ffff && q >= 0x100 && !(0x1_0000..=0x1_ffff).contains(&q)));
        // 64 draws from ~2^24 values: a repeat is a 1-in-8000 event, all equal never.
        assert!(qs.len() > 1);
        assert!((0..16).all(|_| random_psn() <= 0xff_ffff));
    }
}
