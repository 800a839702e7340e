//! Units: one parser for each kind of quantity a user writes, and one meaning per word.
//!
//! - **Rates** ([`parse_rate`]) are bits per second, whatever the spelling or case:
//!   `100Gbps`, `100gbps`, `25Gb/s`, `400G`, `1gbit` and `500mbit` all read as bits
//!   (decimal multiples k, M, G, T). A rate written in bytes (`10GB/s`, `10GBps`: a
//!   capital B) is refused with the bit-rate to write instead. tc's own syntax, where
//!   `bps` means *bytes* per second, appears only where tc is called: [`tc_rate`]
//!   writes it from bits.
//! - **Sizes** ([`parse_bytes`]): a count of bytes, with GNU dd's multiples (coreutils'
//!   `dd --help`: "kB=1000, K=1024, MB=1000*1000, M=1024*1024 … Binary prefixes can be
//!   used, too: KiB=K, MiB=M"): a bare `K`, `M`, `G`, `T` or `KiB`, `MiB`, `GiB`, `TiB`
//!   is binary (`4K` = `4KiB` = 4,096), `kB`, `MB`, `GB`, `TB` decimal (`10MB` =
//!   10,000,000), and a trailing `B` alone is bytes (`64B` = `64`). Case does not
//!   matter but in `B`/`b`: a lower-case `b` is a bit, and bits are no size.
//! - **Durations** ([`parse_duration`]): a number and its unit (`250ns`, `10us`,
//!   `1.5ms`, `2s`); a bare number is refused, the unit is never guessed. (The CLI's
//!   flags whose help says seconds take a bare number as seconds, or a duration.)

/// Why a quantity did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error(
        "rate {0:?} is not a positive rate like 100Gbps, 25Gb/s, 400G or 1gbit \
         (bits per second)"
    )]
    Rate(String),
    #[error("rate {0:?} is in bytes per second; rates here are bits per second: write {1}")]
    ByteRate(String, String),
    #[error(
        "bad size {0:?} (a count of bytes: 64, 4K = 4KiB = 4096, 1M = 1MiB, 10MB = 10,000,000, 1G)"
    )]
    Size(String),
    #[error("bad duration {0:?}: {1}")]
    Duration(String, String),
}

/// A rate in bits per second (see the module docs for the spellings).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Rate(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() || c == '/')
        .ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let (mult, rest) = match unit.chars().next() {
        Some('k' | 'K') => (1e3, &unit[1..]),
        Some('m' | 'M') => (1e6, &unit[1..]),
        Some('g' | 'G') => (1e9, &unit[1..]),
        Some('t' | 'T') => (1e12, &unit[1..]),
        _ => (1.0, unit),
    };
    let bits = v * mult;
    match rest {
        "" | "b" | "bps" | "b/s" | "bit" | "bit/s" | "bits" | "Bit" => {}
        "B" | "Bps" | "B/s" => {
            let ok = v.is_finite() && v > 0.0 && bits * 8.0 < 1e15;
            return Err(if ok {
                UnitError::ByteRate(s.to_string(), format_rate_bits(bits * 8.0))
            } else {
                bad()
            });
        }
        _ => return Err(bad()),
    }
    // A multiplier alone ("400G") is a rate; a bare number is not.
    if unit.is_empty() || (rest.is_empty() && mult == 1.0) {
        return Err(bad());
    }
    if !(v.is_finite() && v > 0.0 && bits < 1e15 && bits >= 1.0) {
        return Err(bad());
    }
    Ok(bits.round() as u64)
}

/// `bits` in the largest decimal multiple that keeps it whole: `prefixes` names T, G,
/// M and k, `unit` follows (`80` `G` `bps`, `1500` `m` `bit`).
fn whole_multiple(bits: u64, prefixes: [&str; 4], unit: &str) -> String {
    let divs = [1_000_000_000_000, 1_000_000_000, 1_000_000, 1_000];
    for (div, prefix) in divs.into_iter().zip(prefixes) {
        if bits >= div && bits % div == 0 {
            return format!("{}{prefix}{unit}", bits / div);
        }
    }
    format!("{bits}{unit}")
}

/// `bits` per second the way rocast writes a rate (`80Gbps`).
fn format_rate_bits(bits: f64) -> String {
    whole_multiple(bits.round() as u64, ["T", "G", "M", "k"], "bps")
}

/// `bits` per second in tc's syntax (where `bps` would be bytes): `1gbit`, `1500mbit`.
pub fn tc_rate(bits: u64) -> String {
    whole_multiple(bits, ["t", "g", "m", "k"], "bit")
}

/// A size in bytes: `64`, `64B`, `4K` = `4KiB` = 4,096, `1M` = `1MiB`, `10MB` =
/// 10,000,000, `1G`, `1T` (GNU dd's multiples, see the module docs).
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Size(s.to_string());
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mut chars = unit.chars();
    let power = match chars.next().map(|c| c.to_ascii_uppercase()) {
        None => 0,
        Some('B') if unit == "B" => 0,
        Some('K') => 1,
        Some('M') => 2,
        Some('G') => 3,
        Some('T') => 4,
        _ => return Err(bad()),
    };
    let base: u64 = match chars.as_str() {
        "" | "iB" | "ib" | "IB" => 1024,
        "B" => 1000,
        _ => return Err(bad()),
    };
    if num.is_empty() {
        return Err(bad());
    }
    num.parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(base.checked_pow(power)?))
        .ok_or_else(bad)
}

/// A duration with its unit: "250ns", "10us", "1.5ms", "2s" → picoseconds. A bare
/// number is refused: the unit is never guessed.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    let bad = |why: String| UnitError::Duration(s.to_string(), why);
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .ok_or_else(|| bad("give a unit (ns, us, ms, s), e.g. 10us".into()))?;
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return Err(bad(format!("unit {unit:?} is not ns, us, ms or s"))),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| bad(format!("{num:?} is not a number")))?;
    let ps = v * scale;
    if !(ps.is_finite() && ps >= 0.0 && ps < 1.8e19) {
        return Err(bad("out of range".into()));
    }
    Ok(ps.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_bit_rate_means_bits() {
        for (text, bits) in [
            ("100Gbps", 100_000_000_000),
            ("100gbps", 100_000_000_000),
            ("100GBPS", 0), // all-caps: B is bytes, refused below
            ("25Gb/s", 25_000_000_000),
            ("400G", 400_000_000_000),
            ("1gbit", 1_000_000_000),
            ("1Gbit", 1_000_000_000),
            ("500mbit", 500_000_000),
            ("1.5gbit", 1_500_000_000),
            ("10Mbps", 10_000_000),
            ("10kbit", 10_000),
            ("1tbit", 1_000_000_000_000),
            ("8000bps", 8_000),
            ("8000bit", 8_000),
        ] {
            if bits == 0 {
                assert!(parse_rate(text).is_err(), "{text}");
            } else {
                assert_eq!(parse_rate(text), Ok(bits), "{text}");
            }
        }
    }

    #[test]
    fn a_byte_rate_is_refused_with_the_bit_rate_to_write() {
        let e = parse_rate("10GB/s").unwrap_err();
        assert_eq!(e, UnitError::ByteRate("10GB/s".into(), "80Gbps".into()));
        assert!(e.to_string().contains("write 80Gbps"), "{e}");
        assert!(matches!(parse_rate("1MBps"), Err(UnitError::ByteRate(..))));
    }

    #[test]
    fn nonsense_rates_are_refused() {
        for bad in [
            "",
            "1",
            "gbit",
            "G",
            "1 gbit",
            "1gbit;",
            "-1gbit",
            "0gbit",
            "1furlong",
            "1gbit rate",
            "$(x)",
            "NaNgbit",
            "infgbit",
            "1e20gbit",
            "0.0001bit",
        ] {
            assert!(
                matches!(parse_rate(bad), Err(UnitError::Rate(_))),
                "{bad:?}: {:?}",
                parse_rate(bad)
            );
        }
    }

    #[test]
    fn tc_gets_bits_in_its_own_words() {
        assert_eq!(tc_rate(1_000_000_000), "1gbit");
        assert_eq!(tc_rate(1_500_000_000), "1500mbit");
        assert_eq!(tc_rate(100_000), "100kbit");
        assert_eq!(tc_rate(999), "999bit");
        for text in ["1gbit", "10Gbps", "25Gb/s", "1.5gbit", "300mbit"] {
            let bits = parse_rate(text).unwrap();
            assert_eq!(parse_rate(&tc_rate(bits)), Ok(bits), "{text}");
        }
    }

    #[test]
    fn sizes_and_durations() {
        for (text, bytes) in [
            ("64", 64),
            ("64B", 64),
            ("4K", 4096),
            ("4k", 4096),
            ("4KiB", 4096),
            ("4kB", 4000),
            ("4KB", 4000),
            ("1m", 1 << 20),
            ("10M", 10 << 20),
            ("10MiB", 10 << 20),
            ("10MB", 10_000_000),
            ("1G", 1 << 30),
            ("1GiB", 1 << 30),
            ("1GB", 1_000_000_000),
            ("2T", 2 << 40),
            ("1TB", 1_000_000_000_000),
            (" 8K ", 8192),
        ] {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
        for bad in [
            "",
            "K",
            "MB",
            "-1",
            "1.5M",
            "10Mb",
            "10b",
            "10 MB",
            "10MiBs",
            "10X",
            "1e6",
            "20000000T",
        ] {
            assert!(
                matches!(parse_bytes(bad), Err(UnitError::Size(_))),
                "{bad:?}: {:?}",
                parse_bytes(bad)
            );
        }
        assert_eq!(parse_duration("250ns"), Ok(250_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000_000));
        assert_eq!(parse_duration("10µs"), Ok(10_000_000));
        assert!(parse_duration("10")
            .unwrap_err()
            .to_string()
            .contains("give a unit"));
        assert!(parse_duration("10h").is_err());
    }
}
