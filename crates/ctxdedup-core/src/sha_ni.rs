//! SHA-256 of two messages at once with the x86 SHA extensions.
//!
//! One message alone cannot go faster than the latency of `sha256rnds2`: every instruction
//! waits for the state the previous one produced (about 4 cycles each on current cores, 32 per
//! 64-byte block, both in the `sha2` crate and in OpenSSL). The unit accepts a new instruction
//! every cycle, though, so two independent messages whose rounds are interleaved take about as
//! long as one. [`sha256_lanes`] keeps two lanes busy over a batch: each lane takes the next
//! message as soon as its current one is done.
//!
//! Written from FIPS 180-4 and the instruction set reference (SHA256RNDS2, SHA256MSG1/2).

use std::arch::x86_64::*;

/// The round constants of FIPS 180-4, §4.2.2.
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// The initial hash value of FIPS 180-4, §5.3.3.
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Whether this CPU has the instructions [`sha256_lanes`] needs.
pub fn available() -> bool {
    is_x86_feature_detected!("sha")
        && is_x86_feature_detected!("sse4.1")
        && is_x86_feature_detected!("ssse3")
}

/// A message's 64-byte blocks: its full blocks in place, then the one or two padded final
/// blocks (FIPS 180-4, §5.1.1) from a small buffer.
struct Blocks<'a> {
    body: &'a [u8],
    tail: [u8; 128],
    tail_len: usize,
    next: usize,
}

impl<'a> Blocks<'a> {
    fn new(message: &'a [u8]) -> Self {
        let full = message.len() / 64 * 64;
        let (body, rest) = message.split_at(full);
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        // The 0x80 byte and the 8-byte length must fit: one block if 9 bytes remain, else two.
        let tail_len = if rest.len() + 9 <= 64 { 64 } else { 128 };
        let bits = (message.len() as u64).wrapping_mul(8);
        tail[tail_len - 8..tail_len].copy_from_slice(&bits.to_be_bytes());
        Self {
            body,
            tail,
            tail_len,
            next: 0,
        }
    }

    /// The next block, or `None` after the last.
    fn next_block(&self) -> Option<&[u8]> {
        let at = self.next * 64;
        if at < self.body.len() {
            return Some(&self.body[at..at + 64]);
        }
        let at = at - self.body.len();
        (at < self.tail_len).then(|| &self.tail[at..at + 64])
    }
}

/// A lane's hash state in the register layout the instructions use: (A, B, E, F) and
/// (C, D, G, H).
#[derive(Clone, Copy)]
struct State {
    abef: __m128i,
    cdgh: __m128i,
}

impl State {
    /// The state `h` (a..h), rearranged.
    #[target_feature(enable = "sha,sse4.1,ssse3")]
    fn load(h: &[u32; 8]) -> Self {
        // SAFETY: reads 16 bytes from each half of an 8-word array; unaligned loads.
        let (abcd, efgh) = unsafe {
            (
                _mm_loadu_si128(h.as_ptr().cast()),
                _mm_loadu_si128(h.as_ptr().add(4).cast()),
            )
        };
        let badc = _mm_shuffle_epi32(abcd, 0xB1);
        let hgfe = _mm_shuffle_epi32(efgh, 0x1B);
        Self {
            abef: _mm_alignr_epi8(badc, hgfe, 8),
            cdgh: _mm_blend_epi16(hgfe, badc, 0xF0),
        }
    }

    /// The state as a..h.
    #[target_feature(enable = "sha,sse4.1,ssse3")]
    fn store(self) -> [u32; 8] {
        let feba = _mm_shuffle_epi32(self.abef, 0x1B);
        let dchg = _mm_shuffle_epi32(self.cdgh, 0xB1);
        let abcd = _mm_blend_epi16(feba, dchg, 0xF0);
        let efgh = _mm_alignr_epi8(dchg, feba, 8);
        let mut h = [0u32; 8];
        // SAFETY: writes 16 bytes into each half of an 8-word array; unaligned stores.
        unsafe {
            _mm_storeu_si128(h.as_mut_ptr().cast(), abcd);
            _mm_storeu_si128(h.as_mut_ptr().add(4).cast(), efgh);
        }
        h
    }
}

/// Loads 16 message bytes as four big-endian words.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn load_words(bytes: &[u8]) -> __m128i {
    assert!(bytes.len() >= 16);
    let swap = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
    // SAFETY: `bytes` holds at least 16 bytes (checked); unaligned load.
    let raw = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
    _mm_shuffle_epi8(raw, swap)
}

/// The round constants for words `4 * group .. 4 * group + 4`.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn constants(group: usize) -> __m128i {
    let k = &K[4 * group..4 * group + 4];
    // SAFETY: `k` holds four words; unaligned load.
    unsafe { _mm_loadu_si128(k.as_ptr().cast()) }
}

/// Four rounds of one lane with message words `w` (already in schedule order).
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn rounds4(s: &mut State, w: __m128i, group: usize) {
    let wk = _mm_add_epi32(w, constants(group));
    // SHA256RNDS2 uses the two low words of `wk`; the updated (A, B, E, F) comes back and the
    // old one becomes (C, D, G, H).
    s.cdgh = _mm_sha256rnds2_epu32(s.cdgh, s.abef, wk);
    s.abef = _mm_sha256rnds2_epu32(s.abef, s.cdgh, _mm_shuffle_epi32(wk, 0x0E));
}

/// Schedule words of group `j >= 4` from groups `j - 4 .. j - 1`.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn schedule(w0: __m128i, w1: __m128i, w2: __m128i, w3: __m128i) -> __m128i {
    // W[t-16] + σ0(W[t-15]), plus W[t-7], then σ1(W[t-2]) added word by word.
    let partial = _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4));
    _mm_sha256msg2_epu32(partial, w3)
}

/// Four rounds of two lanes with message words `wa` and `wb` (in schedule order).
///
/// One assembly block, so that the compiler cannot regroup the instructions by lane: the gain
/// comes from the two lanes' `sha256rnds2` alternating, each hiding the other's latency.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn rounds4_x2(a: &mut State, wa: __m128i, b: &mut State, wb: __m128i, group: usize) {
    let k = constants(group);
    let (wka, wkb) = (_mm_add_epi32(wa, k), _mm_add_epi32(wb, k));
    // SAFETY: register-only SHA and SSE2 instructions, which this function's target features
    // guarantee; xmm0 (SHA256RNDS2's implicit operand) is declared clobbered.
    unsafe {
        std::arch::asm!(
            "movdqa xmm0, {wka}",
            "sha256rnds2 {a_cdgh}, {a_abef}, xmm0",
            "movdqa xmm0, {wkb}",
            "sha256rnds2 {b_cdgh}, {b_abef}, xmm0",
            "pshufd xmm0, {wka}, 0x0E",
            "sha256rnds2 {a_abef}, {a_cdgh}, xmm0",
            "pshufd xmm0, {wkb}, 0x0E",
            "sha256rnds2 {b_abef}, {b_cdgh}, xmm0",
            wka = in(xmm_reg) wka,
            wkb = in(xmm_reg) wkb,
            a_cdgh = inout(xmm_reg) a.cdgh,
            a_abef = inout(xmm_reg) a.abef,
            b_cdgh = inout(xmm_reg) b.cdgh,
            b_abef = inout(xmm_reg) b.abef,
            out("xmm0") _,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
}

/// Message words of group `$group` for every lane in slot `$slot` (a literal, so that all
/// indexing is constant and the words stay in registers), computed from the previous four
/// groups when `$expand`; then `$rounds` with them.
macro_rules! lanes_step {
    ($words:ident, $slot:literal, $expand:expr, |$w:ident| $rounds:expr) => {{
        if $expand {
            for w in $words.iter_mut() {
                w[$slot] = schedule(
                    w[$slot],
                    w[($slot + 1) % 4],
                    w[($slot + 2) % 4],
                    w[($slot + 3) % 4],
                );
            }
        }
        let $w = $words.map(|w| w[$slot]);
        $rounds
    }};
}

/// The four message vectors of a block.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn block_words(block: &[u8]) -> [__m128i; 4] {
    [
        load_words(&block[0..]),
        load_words(&block[16..]),
        load_words(&block[32..]),
        load_words(&block[48..]),
    ]
}

/// Compresses one block into each of two lanes, their rounds interleaved.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn compress2(a: &mut State, block_a: &[u8], b: &mut State, block_b: &[u8]) {
    let (saved_a, saved_b) = (*a, *b);
    let mut words = [block_words(block_a), block_words(block_b)];
    for quarter in 0..4 {
        let group = 4 * quarter;
        let expand = quarter > 0;
        lanes_step!(words, 0, expand, |w| rounds4_x2(a, w[0], b, w[1], group));
        lanes_step!(words, 1, expand, |w| rounds4_x2(
            a,
            w[0],
            b,
            w[1],
            group + 1
        ));
        lanes_step!(words, 2, expand, |w| rounds4_x2(
            a,
            w[0],
            b,
            w[1],
            group + 2
        ));
        lanes_step!(words, 3, expand, |w| rounds4_x2(
            a,
            w[0],
            b,
            w[1],
            group + 3
        ));
    }
    for (state, saved) in [(a, saved_a), (b, saved_b)] {
        state.abef = _mm_add_epi32(state.abef, saved.abef);
        state.cdgh = _mm_add_epi32(state.cdgh, saved.cdgh);
    }
}

/// Compresses one block into one lane.
#[target_feature(enable = "sha,sse4.1,ssse3")]
fn compress1(s: &mut State, block: &[u8]) {
    let saved = *s;
    let mut words = [block_words(block)];
    for quarter in 0..4 {
        let group = 4 * quarter;
        let expand = quarter > 0;
        lanes_step!(words, 0, expand, |w| rounds4(s, w[0], group));
        lanes_step!(words, 1, expand, |w| rounds4(s, w[0], group + 1));
        lanes_step!(words, 2, expand, |w| rounds4(s, w[0], group + 2));
        lanes_step!(words, 3, expand, |w| rounds4(s, w[0], group + 3));
    }
    s.abef = _mm_add_epi32(s.abef, saved.abef);
    s.cdgh = _mm_add_epi32(s.cdgh, saved.cdgh);
}

/// A message in progress in a lane.
struct Lane<'a> {
    index: usize,
    blocks: Blocks<'a>,
    state: State,
}

/// SHA-256 digests of `messages`, in order, two lanes at a time.
///
/// # Safety
/// The CPU must have the SHA, SSE4.1 and SSSE3 instructions ([`available`]).
#[target_feature(enable = "sha,sse4.1,ssse3")]
pub unsafe fn sha256_lanes(messages: &[&[u8]]) -> Vec<[u8; 32]> {
    let mut digests = vec![[0u8; 32]; messages.len()];
    let mut waiting = 0..messages.len();
    let mut start = |index: usize| Lane {
        index,
        blocks: Blocks::new(messages[index]),
        state: State::load(&H0),
    };
    let mut lanes: [Option<Lane<'_>>; 2] = [
        waiting.next().map(&mut start),
        waiting.next().map(&mut start),
    ];
    loop {
        match &mut lanes {
            [Some(a), Some(b)] => {
                let (Some(block_a), Some(block_b)) = (a.blocks.next_block(), b.blocks.next_block())
                else {
                    unreachable!("a lane holds a message with blocks left");
                };
                compress2(&mut a.state, block_a, &mut b.state, block_b);
                a.blocks.next += 1;
                b.blocks.next += 1;
            }
            [Some(a), None] | [None, Some(a)] => {
                let Some(block) = a.blocks.next_block() else {
                    unreachable!("a lane holds a message with blocks left");
                };
                compress1(&mut a.state, block);
                a.blocks.next += 1;
            }
            [None, None] => break,
        }
        // A lane whose message is done hands in its digest and takes the next message.
        for lane in &mut lanes {
            if let Some(done) = lane.take_if(|l| l.blocks.next_block().is_none()) {
                let words = done.state.store();
                for (chunk, word) in digests[done.index].chunks_exact_mut(4).zip(words) {
                    chunk.copy_from_slice(&word.to_be_bytes());
                }
                *lane = waiting.next().map(&mut start);
            }
        }
    }
    digests
}
