//! Latency against throughput of the x86 `sha256rnds2` instruction: why one SHA-256 stream runs
//! at the same speed in every library, and why interleaving independent messages pays.
//!
//!   cargo run --release -p ctxdedup-core --example sha_rounds_latency
//!
//! Prints nanoseconds per instruction with 1, 2 and 4 independent dependency chains. With one
//! chain each instruction waits for the previous result (latency); with more, the unit overlaps
//! them (throughput).

#[cfg(target_arch = "x86_64")]
mod chains {
    use std::arch::x86_64::*;

    /// `N` independent chains of `steps` instructions each; returns a value depending on all.
    #[target_feature(enable = "sha,sse2")]
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        reason = "lane numbers below N, a handful"
    )]
    pub fn run<const N: usize>(steps: u64) -> i32 {
        let k = _mm_set1_epi32(3);
        let mut abef: [__m128i; N] = std::array::from_fn(|i| _mm_set1_epi32(i as i32 + 1));
        let mut cdgh: [__m128i; N] = std::array::from_fn(|i| _mm_set1_epi32(i as i32 + 7));
        for _ in 0..steps {
            for lane in 0..N {
                let next = _mm_sha256rnds2_epu32(cdgh[lane], abef[lane], k);
                cdgh[lane] = abef[lane];
                abef[lane] = next;
            }
        }
        let mut acc = _mm_setzero_si128();
        for lane in 0..N {
            acc = _mm_xor_si128(acc, _mm_xor_si128(abef[lane], cdgh[lane]));
        }
        _mm_cvtsi128_si32(acc)
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use std::time::Instant;
    if !is_x86_feature_detected!("sha") {
        println!("this CPU has no SHA extensions");
        return;
    }
    const INSTRUCTIONS: u64 = 400_000_000;
    let time = |chains: u64, f: fn(u64) -> i32| {
        let start = Instant::now();
        let check = f(INSTRUCTIONS / chains);
        let ns = start.elapsed().as_nanos() as f64 / INSTRUCTIONS as f64;
        println!("{chains} chain(s): {ns:.3} ns per sha256rnds2 (check {check})");
    };
    // SAFETY: the CPU has the SHA extensions (checked above); SSE2 is baseline on x86_64.
    time(1, |n| unsafe { chains::run::<1>(n) });
    // SAFETY: as above.
    time(2, |n| unsafe { chains::run::<2>(n) });
    // SAFETY: as above.
    time(4, |n| unsafe { chains::run::<4>(n) });
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("x86_64 only");
}
