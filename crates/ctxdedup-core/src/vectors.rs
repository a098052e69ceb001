//! Cosine similarity over dense `f32` embeddings: nearest neighbours, every pair above a
//! threshold, and clusters of similar memories (single or complete linkage).
//!
//! Decisions are made on the exact cosine, computed in `f64` from the stored `f32` values, so a
//! similarity of exactly a threshold is on the same side of it on every platform. The all-pairs
//! scan first filters with a fast `f32` kernel on unit vectors (SIMD where the CPU has it, both
//! cores), keeping a margin far above its rounding error, and then rescores the survivors exactly.

use ahash::AHashSet;

use crate::to_u32;
use crate::union_find::UnionFind;

/// Why a matrix of embeddings was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorError {
    /// The dimension is zero.
    ZeroDimension,
    /// The data length is not a multiple of the dimension.
    RaggedData { len: usize, dim: usize },
    /// A query vector's length differs from the matrix dimension.
    QueryDimension { expected: usize, got: usize },
    /// A component is NaN or infinite.
    NotFinite { row: usize, column: usize },
}

impl std::fmt::Display for VectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ZeroDimension => write!(f, "dimension must be at least 1"),
            Self::RaggedData { len, dim } => {
                write!(
                    f,
                    "{len} values are not a whole number of {dim}-dimensional vectors"
                )
            }
            Self::QueryDimension { expected, got } => {
                write!(
                    f,
                    "query has {got} dimensions, the embeddings have {expected}"
                )
            }
            Self::NotFinite { row, column } => {
                write!(f, "vectors[{row}][{column}] is not a finite number")
            }
        }
    }
}

impl std::error::Error for VectorError {}

/// `n` embeddings of `dim` components each, row-major, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Embeddings<'a> {
    data: &'a [f32],
    dim: usize,
}

impl<'a> Embeddings<'a> {
    /// Checks shape and finiteness (NaN would make every comparison silently false).
    pub fn new(data: &'a [f32], dim: usize) -> Result<Self, VectorError> {
        if dim == 0 {
            return Err(VectorError::ZeroDimension);
        }
        if data.len() % dim != 0 {
            return Err(VectorError::RaggedData {
                len: data.len(),
                dim,
            });
        }
        if let Some(at) = data.iter().position(|v| !v.is_finite()) {
            return Err(VectorError::NotFinite {
                row: at / dim,
                column: at % dim,
            });
        }
        Ok(Self { data, dim })
    }

    /// Number of embeddings.
    pub fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Components per embedding.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Embedding `i`.
    pub fn row(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

/// Exact cosine similarity in `f64`; 0 when either vector is all zeros (it points nowhere).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())).clamp(-1.0, 1.0)
}

/// One neighbour or one similar pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub index: u32,
    pub similarity: f64,
}

/// The `k` embeddings most similar to `query`, most similar first, ties by lower index.
///
/// Similarities are the exact [`cosine`]s. On many rows, an `f32` pass ([`approximate_cosines`])
/// first rules out the rows that cannot be among the `k`: every row whose approximation is more
/// than twice the error bound below the `k`-th best approximation is below `k` other rows exactly,
/// so only the rest (and rows the approximation cannot bound) are scored exactly.
pub fn nearest(
    embeddings: Embeddings<'_>,
    query: &[f32],
    k: usize,
) -> Result<Vec<Scored>, VectorError> {
    nearest_from(embeddings, query, k, NEAREST_FILTER_FROM_ROWS)
}

/// From this many rows, [`nearest`] filters with the `f32` pass (below it, scoring every row
/// exactly costs about as much).
const NEAREST_FILTER_FROM_ROWS: usize = 1024;

/// [`nearest`], filtering from `filter_from` rows.
fn nearest_from(
    embeddings: Embeddings<'_>,
    query: &[f32],
    k: usize,
    filter_from: usize,
) -> Result<Vec<Scored>, VectorError> {
    if query.len() != embeddings.dim() {
        return Err(VectorError::QueryDimension {
            expected: embeddings.dim(),
            got: query.len(),
        });
    }
    if let Some(column) = query.iter().position(|v| !v.is_finite()) {
        return Err(VectorError::NotFinite { row: 0, column });
    }
    let n = embeddings.len();
    let k = k.min(n);
    let exact = |i: usize| Scored {
        index: to_u32(i),
        similarity: cosine(embeddings.row(i), query),
    };
    let mut scored: Vec<Scored> = match approximate_cosines(embeddings, query, k, filter_from) {
        Some((approx, margin)) => {
            // The k-th best of the bounded approximations (there are at least k of them).
            let mut known: Vec<f32> = approx.iter().copied().filter(|a| !a.is_nan()).collect();
            let kth = *known.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1;
            let cut = kth - 2.0 * margin;
            (0..n)
                .filter(|&i| approx[i].is_nan() || approx[i] >= cut)
                .map(exact)
                .collect()
        }
        None => (0..n).map(exact).collect(),
    };
    let by_rank = |a: &Scored, b: &Scored| {
        b.similarity
            .total_cmp(&a.similarity)
            .then(a.index.cmp(&b.index))
    };
    if k < scored.len() && k > 0 {
        scored.select_nth_unstable_by(k - 1, by_rank);
    }
    scored.truncate(k);
    scored.sort_unstable_by(by_rank);
    Ok(scored)
}

/// Each row's cosine with `query` from an `f32` dot product with the unit query and the row's
/// norm, and the bound `m` of their error: `|approx - cosine| <= m`. NaN marks a row whose norm is
/// too small or too large for the `f32` products to be bounded that way (scored exactly). `None`
/// when filtering does not pay: fewer than `filter_from` rows, `k` of 0 or more than a quarter of
/// them, a zero query, or fewer than `k` bounded rows.
///
/// The bound: the unit query's components are rounded once (relative error `2^-24`), and the dot
/// product of `dim` terms in `f32` has an absolute error of at most `dim * 2^-24 * |q| * |r|` plus
/// `dim * 2^-149` for underflow; divided by the row's norm (accurate in `f64`) and with `|q| = 1`,
/// that is under `(dim + 1) * 2^-23` for rows of norm at least `2^-60`. The margin doubles it and
/// adds [`FILTER_MARGIN`].
fn approximate_cosines(
    embeddings: Embeddings<'_>,
    query: &[f32],
    k: usize,
    filter_from: usize,
) -> Option<(Vec<f32>, f32)> {
    let n = embeddings.len();
    if n < filter_from || k == 0 || k > n / 4 {
        return None;
    }
    let dim = embeddings.dim();
    let norm = |v: &[f32]| norm_lanes(v);
    let qn = norm(query);
    if qn == 0.0 {
        return None;
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the unit query in f32: its rounding is part of the bound"
    )]
    let unit: Vec<f32> = query.iter().map(|&v| (f64::from(v) / qn) as f32).collect();
    // Rows outside this norm range get NaN: f32 products of tiny rows lose their precision to
    // underflow, and those of huge ones may overflow.
    let bounded = |rn: f64| (2f64.powi(-60)..=2f64.powi(60)).contains(&rn);
    let kernels = kernel::select();
    let mut approx = vec![f32::NAN; n];
    #[expect(
        clippy::cast_possible_truncation,
        reason = "an approximation, within the margin"
    )]
    let mut put = |i: usize, dot: f32, row: &[f32]| {
        let rn = norm(row);
        if bounded(rn) {
            approx[i] = (f64::from(dot) / rn) as f32;
        }
    };
    let mut i = 0;
    while i + 4 <= n {
        let rows = [
            embeddings.row(i),
            embeddings.row(i + 1),
            embeddings.row(i + 2),
            embeddings.row(i + 3),
        ];
        let dots = (kernels.dot4)(&unit, rows);
        for (r, dot) in dots.into_iter().enumerate() {
            put(i + r, dot, rows[r]);
        }
        i += 4;
    }
    for i in i..n {
        put(
            i,
            (kernels.dot)(&unit, embeddings.row(i)),
            embeddings.row(i),
        );
    }
    if approx.iter().filter(|a| !a.is_nan()).count() < k {
        return None;
    }
    #[expect(clippy::cast_precision_loss, reason = "dimensions far below 2^24")]
    let margin = FILTER_MARGIN + 2.0 * (dim as f32 + 1.0) * 2f32.powi(-23);
    Some((approx, margin))
}

/// Euclidean norm in `f64` with eight independent sums (vectorizable; accurate to a few `f64`
/// ulps, far below the `f32` filter's margin).
fn norm_lanes(v: &[f32]) -> f64 {
    let mut acc = [0f64; 8];
    let whole = v.len() - v.len() % 8;
    for chunk in v[..whole].chunks_exact(8) {
        for l in 0..8 {
            let x = f64::from(chunk[l]);
            acc[l] += x * x;
        }
    }
    let tail: f64 = v[whole..]
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum();
    (acc.iter().sum::<f64>() + tail).sqrt()
}

/// A pair `a < b` whose exact cosine similarity reached the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarPair {
    pub a: u32,
    pub b: u32,
    pub similarity: f64,
}

/// Far above the `f32` kernel's rounding error on unit vectors (about `dim * 2^-24`, i.e. under
/// 1e-4 up to 1,500 dimensions), so the filter never drops a pair the exact cosine would keep.
const FILTER_MARGIN: f32 = 2e-3;

/// Rows per tile: a tile of unit vectors stays in L2 while the other tile streams past it.
const TILE: usize = 128;

/// Every pair with exact cosine similarity `>= threshold`, sorted by `(a, b)`.
pub fn similar_pairs(embeddings: Embeddings<'_>, threshold: f64) -> Vec<SimilarPair> {
    let mut pairs: Vec<SimilarPair> = scan_similar(embeddings, threshold, Vec::new, Vec::push)
        .into_iter()
        .flatten()
        .collect();
    pairs.sort_unstable_by_key(|p| (p.a, p.b));
    pairs
}

/// Every pair with exact cosine similarity `>= threshold`, handed to `visit` with the state of
/// the worker thread that found it (each worker starts from `new()`); the workers' states, in
/// no particular order. The pairs are never all held at once unless `visit` keeps them.
fn scan_similar<S: Send>(
    embeddings: Embeddings<'_>,
    threshold: f64,
    new: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, SimilarPair) + Sync,
) -> Vec<S> {
    let n = embeddings.len();
    if n < 2 {
        return Vec::new();
    }
    let dim = embeddings.dim();
    let unit = unit_rows(embeddings);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the f32 filter keeps a margin far above the rounding"
    )]
    let cut = threshold as f32 - FILTER_MARGIN;
    let tiles = n.div_ceil(TILE);
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, tiles);
    let kernels = kernel::select();

    // Tile row `t` pairs with tiles t..tiles, so early rows carry more work: deal them out
    // round-robin so each worker gets a similar share of the triangle.
    let scan = |worker: usize| {
        let mut found = new();
        for ti in (worker..tiles).step_by(workers) {
            let rows_i = ti * TILE..((ti + 1) * TILE).min(n);
            for tj in ti..tiles {
                let rows_j = tj * TILE..((tj + 1) * TILE).min(n);
                for i in rows_i.clone() {
                    let a = &unit[i * dim..(i + 1) * dim];
                    let start = if ti == tj { i + 1 } else { rows_j.start };
                    let mut keep = |j: usize, approx: f32| {
                        if approx >= cut {
                            let similarity = cosine(embeddings.row(i), embeddings.row(j));
                            if similarity >= threshold {
                                visit(
                                    &mut found,
                                    SimilarPair {
                                        a: to_u32(i),
                                        b: to_u32(j),
                                        similarity,
                                    },
                                );
                            }
                        }
                    };
                    let mut j = start;
                    while j + 4 <= rows_j.end {
                        let row = |k: usize| &unit[(j + k) * dim..(j + k + 1) * dim];
                        let dots = (kernels.dot4)(a, [row(0), row(1), row(2), row(3)]);
                        for (k, d) in dots.into_iter().enumerate() {
                            keep(j + k, d);
                        }
                        j += 4;
                    }
                    for j in j..rows_j.end {
                        keep(j, (kernels.dot)(a, &unit[j * dim..(j + 1) * dim]));
                    }
                }
            }
        }
        found
    };
    if workers == 1 {
        vec![scan(0)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers).map(|w| s.spawn(move || scan(w))).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("similar_pairs worker panicked"))
                .collect()
        })
    }
}

/// Edges of one cluster: `(count, lowest similarity, highest similarity)`.
type EdgeStats = (usize, f64, f64);

const NO_EDGES: EdgeStats = (0, f64::INFINITY, f64::NEG_INFINITY);

fn merge_edges(a: EdgeStats, b: EdgeStats) -> EdgeStats {
    (a.0 + b.0, a.1.min(b.1), a.2.max(b.2))
}

/// Single-linkage components built pair by pair, with each component's [`EdgeStats`] kept at its
/// root: memory linear in the embeddings, however many pairs are similar.
struct EdgeForest {
    sets: UnionFind,
    edges: Vec<EdgeStats>,
}

impl EdgeForest {
    fn new(n: usize) -> Self {
        Self {
            sets: UnionFind::new(n),
            edges: vec![NO_EDGES; n],
        }
    }

    /// Joins the components of `a` and `b`; their root.
    fn join(&mut self, a: usize, b: usize) -> usize {
        let (ra, rb) = (self.sets.find(a), self.sets.find(b));
        if ra == rb {
            return ra;
        }
        self.sets.union(ra, rb);
        let root = self.sets.find(ra);
        let other = if root == ra { rb } else { ra };
        self.edges[root] = merge_edges(self.edges[root], self.edges[other]);
        root
    }

    fn add(&mut self, p: SimilarPair) {
        let root = self.join(p.a as usize, p.b as usize);
        self.edges[root] = merge_edges(self.edges[root], (1, p.similarity, p.similarity));
    }

    /// Adds the components and edges of `other` (found by another worker: no edge is in both).
    fn absorb(&mut self, mut other: EdgeForest) {
        let n = self.edges.len();
        for x in 0..n {
            let r = other.sets.find(x);
            if r != x {
                self.join(x, r);
            }
        }
        for x in 0..n {
            if other.sets.find(x) == x && other.edges[x].0 > 0 {
                let root = self.sets.find(x);
                self.edges[root] = merge_edges(self.edges[root], other.edges[x]);
            }
        }
    }
}

/// The single-linkage clusters (components of at least two members) and their [`EdgeStats`].
fn single_linkage(embeddings: Embeddings<'_>, threshold: f64) -> (Vec<Vec<usize>>, Vec<EdgeStats>) {
    let n = embeddings.len();
    let mut forests = scan_similar(
        embeddings,
        threshold,
        || EdgeForest::new(n),
        EdgeForest::add,
    )
    .into_iter();
    let mut forest = forests.next().unwrap_or_else(|| EdgeForest::new(n));
    for other in forests {
        forest.absorb(other);
    }
    let groups = forest.sets.groups(2);
    let edges = groups
        .iter()
        .map(|members| forest.edges[forest.sets.find(members[0])])
        .collect();
    (groups, edges)
}

/// The [`EdgeStats`] of each of `groups` from `pairs`.
fn edges_of(n: usize, groups: &[Vec<usize>], pairs: &[SimilarPair]) -> Vec<EdgeStats> {
    let mut cluster_of = vec![u32::MAX; n];
    for (c, members) in groups.iter().enumerate() {
        for &m in members {
            cluster_of[m] = to_u32(c);
        }
    }
    let mut edges = vec![NO_EDGES; groups.len()];
    for p in pairs {
        let (ca, cb) = (cluster_of[p.a as usize], cluster_of[p.b as usize]);
        if ca == cb && ca != u32::MAX {
            let e = &mut edges[ca as usize];
            *e = merge_edges(*e, (1, p.similarity, p.similarity));
        }
    }
    edges
}

/// Rows scaled to unit length in `f32` (zero rows stay zero and never pass the filter unless
/// the threshold is at most 0, where the exact rescoring decides).
fn unit_rows(embeddings: Embeddings<'_>) -> Vec<f32> {
    let mut out = Vec::with_capacity(embeddings.len() * embeddings.dim());
    for i in 0..embeddings.len() {
        let row = embeddings.row(i);
        let norm = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt();
        #[expect(
            clippy::cast_possible_truncation,
            reason = "f32 vectors, scaled in f64 for accuracy"
        )]
        let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
        out.extend(row.iter().map(|&v| v * scale));
    }
    out
}

/// The `f32` dot-product kernels, picked once per call by CPU feature.
mod kernel {
    /// One row against one row.
    pub type Dot = fn(&[f32], &[f32]) -> f32;
    /// One row against four: each load of `a` feeds four multiply-adds, which roughly doubles
    /// throughput over four single dots (a single dot is bound by loads, not arithmetic).
    pub type Dot4 = fn(&[f32], [&[f32]; 4]) -> [f32; 4];

    #[derive(Clone, Copy)]
    pub struct Kernels {
        pub dot: Dot,
        pub dot4: Dot4,
    }

    /// `x * y + acc`, fused when `FUSED` (only inside functions that enable FMA: elsewhere
    /// `mul_add` is a slow library call).
    #[inline(always)]
    fn madd<const FUSED: bool>(x: f32, y: f32, acc: f32) -> f32 {
        if FUSED {
            x.mul_add(y, acc)
        } else {
            x * y + acc
        }
    }

    /// Eight independent lanes per accumulator so the compiler can vectorize without
    /// reassociating a single sum, which IEEE rules forbid it to do on its own.
    #[inline(always)]
    fn dot4_lanes<const FUSED: bool, const ROWS: usize>(
        a: &[f32],
        b: [&[f32]; ROWS],
    ) -> [f32; ROWS] {
        let n = a.len();
        let whole = n - n % 8;
        let mut acc = [[0f32; 8]; ROWS];
        for k in (0..whole).step_by(8) {
            let x = &a[k..k + 8];
            for (r, row) in b.iter().enumerate() {
                let y = &row[k..k + 8];
                for l in 0..8 {
                    acc[r][l] = madd::<FUSED>(x[l], y[l], acc[r][l]);
                }
            }
        }
        let mut out = [0f32; ROWS];
        for (r, row) in b.iter().enumerate() {
            out[r] = acc[r].iter().sum::<f32>()
                + a[whole..]
                    .iter()
                    .zip(&row[whole..])
                    .map(|(x, y)| x * y)
                    .sum::<f32>();
        }
        out
    }

    fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
        dot4_lanes::<false, 1>(a, [b])[0]
    }

    fn dot4_portable(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
        dot4_lanes::<false, 4>(a, b)
    }

    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn dot_impl(a: &[f32], b: &[f32]) -> f32 {
            super::dot4_lanes::<true, 1>(a, [b])[0]
        }

        #[target_feature(enable = "avx2,fma")]
        unsafe fn dot4_impl(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
            super::dot4_lanes::<true, 4>(a, b)
        }

        pub fn dot(a: &[f32], b: &[f32]) -> f32 {
            // SAFETY: `select` hands these out only after detecting AVX2 and FMA.
            unsafe { dot_impl(a, b) }
        }

        pub fn dot4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: as above.
            unsafe { dot4_impl(a, b) }
        }
    }

    pub fn select() -> Kernels {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Kernels {
                dot: avx2::dot,
                dot4: avx2::dot4,
            };
        }
        portable()
    }

    pub fn portable() -> Kernels {
        Kernels {
            dot: dot_portable,
            dot4: dot4_portable,
        }
    }
}

/// How similar pairs are joined into clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linkage {
    /// Connected components of the similarity graph (A~B and B~C put A, B, C together).
    Single,
    /// Every two members of a cluster are themselves a similar pair. Built greedily: pairs are
    /// taken most similar first, and two clusters join only if every cross pair is similar.
    Complete,
}

/// One cluster of two or more memories.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Member indexes, ascending.
    pub members: Vec<u32>,
    /// Lowest exact similarity over all member pairs (below the threshold under single linkage
    /// when the cluster is a chain).
    pub min_similarity: f64,
    /// Highest exact similarity over all member pairs.
    pub max_similarity: f64,
}

/// Clusters of the embeddings whose similarity reaches `threshold`, ordered by smallest member.
///
/// Single linkage keeps no list of the similar pairs (its memory is linear in the embeddings);
/// complete linkage needs them all.
pub fn cluster(embeddings: Embeddings<'_>, threshold: f64, linkage: Linkage) -> Vec<Cluster> {
    let (groups, edges) = match linkage {
        Linkage::Single => single_linkage(embeddings, threshold),
        Linkage::Complete => {
            let pairs = similar_pairs(embeddings, threshold);
            let groups = complete_linkage(embeddings.len(), &pairs);
            let edges = edges_of(embeddings.len(), &groups, &pairs);
            (groups, edges)
        }
    };
    let mut unit: Option<Vec<f32>> = None;
    groups
        .into_iter()
        .zip(edges)
        .map(|(members, (count, min_edge, max_edge))| {
            let k = members.len();
            // Every edge reaches the threshold and every non-edge is below it, so the maximum is
            // an edge, and so is the minimum when every pair is an edge (always, for complete).
            let min_similarity = if count == k * (k - 1) / 2 {
                min_edge
            } else {
                let unit = unit.get_or_insert_with(|| unit_rows(embeddings));
                min_over_pairs(embeddings, unit, &members)
            };
            Cluster {
                members: members.into_iter().map(to_u32).collect(),
                min_similarity,
                max_similarity: max_edge,
            }
        })
        .collect()
}

/// A `u64` whose order is `f64::total_cmp`'s order of `x`.
fn total_order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Exact minimum cosine over all pairs of `members`: the fast kernel finds the approximate
/// minimum, then only pairs within the kernel's error margin of it are rescored exactly.
fn min_over_pairs(embeddings: Embeddings<'_>, unit: &[f32], members: &[usize]) -> f64 {
    let dim = embeddings.dim();
    let kernels = kernel::select();
    let row = |i: usize| &unit[i * dim..(i + 1) * dim];
    let approx = |a: usize, b: usize| (kernels.dot)(row(a), row(b));
    let mut lowest = f32::INFINITY;
    for (x, &a) in members.iter().enumerate() {
        for &b in &members[x + 1..] {
            lowest = lowest.min(approx(a, b));
        }
    }
    let cut = lowest + 2.0 * FILTER_MARGIN;
    let mut min = f64::INFINITY;
    for (x, &a) in members.iter().enumerate() {
        for &b in &members[x + 1..] {
            if approx(a, b) <= cut {
                min = min.min(cosine(embeddings.row(a), embeddings.row(b)));
            }
        }
    }
    min
}

fn complete_linkage(n: usize, pairs: &[SimilarPair]) -> Vec<Vec<usize>> {
    let key = |a: u32, b: u32| (u64::from(a) << 32) | u64::from(b);
    let mut similar: AHashSet<u64> = AHashSet::with_capacity(pairs.len());
    similar.extend(pairs.iter().map(|p| key(p.a, p.b)));
    // Most similar first, ties by `(a, b)`: one integer key per pair, sorted directly (the
    // similarity's `f64::total_cmp` order, reversed).
    let mut order: Vec<(u64, u32, u32)> = pairs
        .iter()
        .map(|p| (!total_order_key(p.similarity), p.a, p.b))
        .collect();
    order.sort_unstable();
    // Cluster ids are never reused, so a remembered failed join of two ids stays valid until
    // one of them joins something else (and gets a new id).
    let mut cluster_of: Vec<usize> = (0..n).collect();
    let mut members: Vec<Vec<u32>> = (0..to_u32(n)).map(|i| vec![i]).collect();
    let mut failed: AHashSet<(usize, usize)> = AHashSet::new();
    for &(_, a, b) in &order {
        let (ca, cb) = (cluster_of[a as usize], cluster_of[b as usize]);
        if ca == cb || failed.contains(&(ca.min(cb), ca.max(cb))) {
            continue;
        }
        let all_similar = members[ca].iter().all(|&x| {
            members[cb]
                .iter()
                .all(|&y| similar.contains(&key(x.min(y), x.max(y))))
        });
        if !all_similar {
            failed.insert((ca.min(cb), ca.max(cb)));
            continue;
        }
        let mut joined = std::mem::take(&mut members[ca]);
        joined.append(&mut std::mem::take(&mut members[cb]));
        let id = members.len();
        for &m in &joined {
            cluster_of[m as usize] = id;
        }
        members.push(joined);
    }
    let mut groups: Vec<Vec<usize>> = members
        .into_iter()
        .filter(|m| m.len() >= 2)
        .map(|m| {
            let mut m: Vec<usize> = m.into_iter().map(|x| x as usize).collect();
            m.sort_unstable();
            m
        })
        .collect();
    groups.sort_unstable_by_key(|g| g[0]);
    groups
}

#[cfg(test)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test data: small indices and byte values"
)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn emb(rows: &[&[f32]]) -> Vec<f32> {
        rows.iter().flat_map(|r| r.iter().copied()).collect()
    }

    #[test]
    fn rejects_bad_shapes() {
        assert_eq!(
            Embeddings::new(&[1.0], 0).unwrap_err(),
            VectorError::ZeroDimension
        );
        assert!(matches!(
            Embeddings::new(&[1.0, 2.0, 3.0], 2),
            Err(VectorError::RaggedData { .. })
        ));
        assert_eq!(
            Embeddings::new(&[1.0, f32::NAN, 0.0, 1.0], 2).unwrap_err(),
            VectorError::NotFinite { row: 0, column: 1 }
        );
        let e = Embeddings::new(&[1.0, 0.0], 2).unwrap();
        assert!(nearest(e, &[1.0], 1).is_err());
    }

    #[test]
    fn cosine_basics() {
        assert_eq!(cosine(&[1.0, 0.0], &[2.0, 0.0]), 1.0);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(cosine(&[1.0, 0.0], &[-1.0, 0.0]), -1.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn nearest_orders_and_breaks_ties_by_index() {
        let data = emb(&[&[0.0, 1.0], &[1.0, 0.0], &[1.0, 0.1], &[2.0, 0.0]]);
        let e = Embeddings::new(&data, 2).unwrap();
        let got = nearest(e, &[1.0, 0.0], 3).unwrap();
        let idx: Vec<u32> = got.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![1, 3, 2]);
        assert_eq!(nearest(e, &[1.0, 0.0], 10).unwrap().len(), 4);
        assert!(nearest(e, &[1.0, 0.0], 0).unwrap().is_empty());
    }

    #[test]
    fn chain_is_one_single_cluster_but_split_by_complete_linkage() {
        // A~B and B~C at ~0.96, A~C at ~0.85: a chain.
        let a = [1.0f32, 0.0];
        let t = 0.28f32; // angle step in radians
        let b = [t.cos(), t.sin()];
        let c = [(2.0 * t).cos(), (2.0 * t).sin()];
        let data = emb(&[&a, &b, &c]);
        let e = Embeddings::new(&data, 2).unwrap();
        let single = cluster(e, 0.9, Linkage::Single);
        assert_eq!(single.len(), 1);
        assert_eq!(single[0].members, vec![0, 1, 2]);
        assert!(single[0].min_similarity < 0.9);
        let complete = cluster(e, 0.9, Linkage::Complete);
        assert_eq!(complete.len(), 1);
        assert_eq!(complete[0].members.len(), 2);
        assert!(complete[0].min_similarity >= 0.9);
    }

    #[test]
    fn threshold_is_inclusive_on_exact_cosine() {
        let data = emb(&[&[3.0, 4.0], &[3.0, 4.0], &[4.0, 3.0]]);
        let e = Embeddings::new(&data, 2).unwrap();
        // cos((3,4),(4,3)) = 24/25 = 0.96 exactly in f64 from these f32 values.
        let s = cosine(e.row(0), e.row(2));
        let pairs = similar_pairs(e, s);
        assert_eq!(pairs.len(), 3);
        let above = similar_pairs(e, s + 1e-12);
        assert_eq!(above.len(), 1);
    }

    /// Greedy complete linkage as documented, written plainly: pairs most similar first (ties by
    /// `(a, b)`); two clusters join when every cross pair is a similar pair.
    fn greedy_complete_linkage(n: usize, pairs: &[SimilarPair]) -> Vec<Vec<usize>> {
        let similar = |x: usize, y: usize| {
            pairs
                .iter()
                .any(|p| (p.a as usize, p.b as usize) == (x.min(y), x.max(y)))
        };
        let mut order: Vec<&SimilarPair> = pairs.iter().collect();
        order.sort_by(|x, y| {
            y.similarity
                .total_cmp(&x.similarity)
                .then((x.a, x.b).cmp(&(y.a, y.b)))
        });
        let mut clusters: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
        let find = |clusters: &[Vec<usize>], m: usize| clusters.iter().position(|c| c.contains(&m));
        for p in order {
            let ca = find(&clusters, p.a as usize).unwrap();
            let cb = find(&clusters, p.b as usize).unwrap();
            if ca != cb
                && clusters[ca]
                    .iter()
                    .all(|&x| clusters[cb].iter().all(|&y| similar(x, y)))
            {
                let moved = std::mem::take(&mut clusters[cb]);
                clusters[ca].extend(moved);
            }
        }
        let mut groups: Vec<Vec<usize>> = clusters
            .into_iter()
            .filter(|c| c.len() >= 2)
            .map(|mut c| {
                c.sort_unstable();
                c
            })
            .collect();
        groups.sort_unstable_by_key(|g| g[0]);
        groups
    }

    fn brute_pairs(e: Embeddings<'_>, threshold: f64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for i in 0..e.len() {
            for j in i + 1..e.len() {
                if cosine(e.row(i), e.row(j)) >= threshold {
                    out.push((i as u32, j as u32));
                }
            }
        }
        out
    }

    fn vectors() -> impl Strategy<Value = (Vec<f32>, usize)> {
        (1usize..40, 1usize..300).prop_flat_map(|(dim, n)| {
            // Few distinct base directions plus small noise, so many pairs are near the cut.
            let base = prop::collection::vec(-1.0f32..1.0, dim * 4);
            let picks = prop::collection::vec((0usize..4, -0.2f32..0.2), n * dim);
            (base, picks).prop_map(move |(base, picks)| {
                let data = (0..n * dim)
                    .map(|k| {
                        let (b, noise) = picks[k];
                        base[b * dim + k % dim] + noise
                    })
                    .collect();
                (data, dim)
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn similar_pairs_match_brute_force((data, dim) in vectors(), threshold in 0.5f64..0.999) {
            let e = Embeddings::new(&data, dim).unwrap();
            let got: Vec<(u32, u32)> =
                similar_pairs(e, threshold).iter().map(|p| (p.a, p.b)).collect();
            prop_assert_eq!(got, brute_pairs(e, threshold));
        }

        #[test]
        fn complete_linkage_matches_its_greedy_definition(
            (data, dim) in vectors(), threshold in 0.3f64..0.99
        ) {
            let e = Embeddings::new(&data, dim).unwrap();
            let pairs = similar_pairs(e, threshold);
            prop_assert_eq!(complete_linkage(e.len(), &pairs), greedy_complete_linkage(e.len(), &pairs));
        }

        #[test]
        fn total_order_keys_sort_as_total_cmp(mut xs in prop::collection::vec(
            prop_oneof![any::<f64>(), Just(0.0), Just(-0.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(f64::NAN)], 0..40,
        )) {
            let mut by_key = xs.clone();
            by_key.sort_by_key(|&x| total_order_key(x));
            xs.sort_by(f64::total_cmp);
            prop_assert_eq!(by_key.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn complete_clusters_are_cliques_and_single_are_components(
            (data, dim) in vectors(), threshold in 0.6f64..0.99
        ) {
            let e = Embeddings::new(&data, dim).unwrap();
            for c in cluster(e, threshold, Linkage::Complete) {
                prop_assert!(c.min_similarity >= threshold);
            }
            let pairs = brute_pairs(e, threshold);
            let single = cluster(e, threshold, Linkage::Single);
            let mut cluster_of = vec![usize::MAX; e.len()];
            for (k, c) in single.iter().enumerate() {
                for &m in &c.members { cluster_of[m as usize] = k; }
            }
            for (a, b) in pairs {
                prop_assert_ne!(cluster_of[a as usize], usize::MAX);
                prop_assert_eq!(cluster_of[a as usize], cluster_of[b as usize]);
            }
            for c in single.iter().chain(&cluster(e, threshold, Linkage::Complete)) {
                let mut sims = Vec::new();
                for (x, &a) in c.members.iter().enumerate() {
                    for &b in &c.members[x + 1..] {
                        sims.push(cosine(e.row(a as usize), e.row(b as usize)));
                    }
                }
                let min = sims.iter().copied().fold(f64::INFINITY, f64::min);
                let max = sims.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                prop_assert_eq!((c.min_similarity, c.max_similarity), (min, max));
            }
        }

        #[test]
        fn nearest_filtered_equals_exact_ranking(
            rows in prop::collection::vec(
                (prop::collection::vec(-1.0f32..1.0, 6), prop::sample::select(vec![0.0f32, 1e-30, 1e-12, 1.0, 3.0, 1e20, 1e36])),
                4..80,
            ),
            copies in prop::collection::vec(0usize..80, 0..20),
            query in prop::collection::vec(-1.0f32..1.0, 6),
            k in 1usize..24,
        ) {
            // Rows at scales the f32 pass cannot bound (tiny, huge, zero), near ties and exact copies.
            let mut data: Vec<f32> = rows.iter().flat_map(|(v, s)| v.iter().map(move |x| x * s)).collect();
            for &c in &copies {
                let c = c % rows.len();
                let copy = data[c * 6..(c + 1) * 6].to_vec();
                data.extend(copy);
            }
            let e = Embeddings::new(&data, 6).unwrap();
            let by_rank = |a: &Scored, b: &Scored| b.similarity.total_cmp(&a.similarity).then(a.index.cmp(&b.index));
            let mut all: Vec<Scored> = (0..e.len()).map(|i| Scored { index: to_u32(i), similarity: cosine(e.row(i), &query) }).collect();
            all.sort_by(by_rank);
            all.truncate(k);
            prop_assert_eq!(nearest_from(e, &query, k, 0).unwrap(), all.clone());
            prop_assert_eq!(nearest(e, &query, k).unwrap(), all);
        }

        #[test]
        fn kernels_agree(v in prop::collection::vec(-1.0f32..1.0, 0..200)) {
            let w: Vec<f32> = v.iter().rev().copied().collect();
            let exact: f64 = v.iter().zip(&w).map(|(&x, &y)| x as f64 * y as f64).sum();
            for k in [kernel::select(), kernel::portable()] {
                prop_assert!(((k.dot)(&v, &w) as f64 - exact).abs() < 1e-3);
                let four = (k.dot4)(&v, [&w, &v, &w, &w]);
                prop_assert!((four[0] as f64 - exact).abs() < 1e-3);
                prop_assert!((four[3] as f64 - exact).abs() < 1e-3);
                let square: f64 = v.iter().map(|&x| x as f64 * x as f64).sum();
                prop_assert!((four[1] as f64 - square).abs() < 1e-3);
            }
        }
    }
}
