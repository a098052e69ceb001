//! Disjoint sets with path halving and union by size.

use crate::to_u32;

/// Union-find over `0..n`.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singleton sets.
    pub fn new(n: usize) -> Self {
        Self {
            parent: (0..to_u32(n)).collect(),
            size: vec![1; n],
        }
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] as usize != x {
            let grand = self.parent[self.parent[x] as usize];
            self.parent[x] = grand;
            x = grand as usize;
        }
        x
    }

    /// Joins the sets of `a` and `b`; returns false if they were already one set.
    pub fn union(&mut self, a: usize, b: usize) -> bool {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        if self.size[ra] < self.size[rb] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb] = to_u32(ra);
        self.size[ra] += self.size[rb];
        true
    }

    /// The sets with at least `min_size` members, each sorted ascending, ordered by their
    /// smallest member.
    pub fn groups(&mut self, min_size: usize) -> Vec<Vec<usize>> {
        let n = self.parent.len();
        let mut slot = vec![u32::MAX; n];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for x in 0..n {
            let root = self.find(x);
            if self.size[root] as usize >= min_size {
                if slot[root] == u32::MAX {
                    slot[root] = to_u32(groups.len());
                    groups.push(Vec::with_capacity(self.size[root] as usize));
                }
                groups[slot[root] as usize].push(x);
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_transitively() {
        let mut uf = UnionFind::new(6);
        assert!(uf.union(0, 3));
        assert!(uf.union(3, 5));
        assert!(!uf.union(5, 0));
        assert!(uf.union(1, 2));
        assert_eq!(uf.groups(2), vec![vec![0, 3, 5], vec![1, 2]]);
        assert_eq!(uf.groups(1).len(), 3);
    }
}
