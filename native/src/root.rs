//! The receipts root of an open block as its flashblocks execute: the Merkle-Patricia root of rlp(i) → receipt i
//! (EIP-2718 bytes), recomputed after every flashblock. Receipts of a held block only ever append, so a leaf's
//! reference depends only on its receipt and the depth it sits at, and an inner node's only on its depth and the run
//! of receipts below it (first, last, how many): both are kept, and a flashblock hashes little more than its own
//! receipts and the spine above them.
use alloy_primitives::{keccak256, B256};
use alloy_rlp::{BufMut, Encodable, Header};
use std::collections::HashMap;

/// How a node appears in its parent: its RLP when shorter than 32 bytes, else its hash.
#[derive(Clone, Debug)]
enum Ref {
    Hash(B256),
    Inline(Vec<u8>),
}

impl Ref {
    fn of(node: Vec<u8>) -> Ref {
        if node.len() < 32 {
            Ref::Inline(node)
        } else {
            Ref::Hash(keccak256(&node))
        }
    }

    fn len(&self) -> usize {
        match self {
            Ref::Hash(_) => 33,
            Ref::Inline(v) => v.len(),
        }
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Ref::Hash(h) => h.as_slice().encode(out),
            Ref::Inline(v) => out.put_slice(v),
        }
    }
}

/// Leaf and inner-node references of one block's receipts trie, built so far.
#[derive(Default)]
pub struct RootCache {
    leaves: HashMap<(u32, u8), Ref>,
    nodes: HashMap<(u8, u32, u32, u32), Ref>,
}

/// The nibbles of rlp(i).
fn key_nibbles(i: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(4);
    i.encode(&mut k);
    k.iter().flat_map(|b| [b >> 4, b & 15]).collect()
}

/// Hex-prefix encoding of a nibble path (Yellow Paper appendix C).
fn hex_prefix(nibbles: &[u8], leaf: bool) -> Vec<u8> {
    let odd = nibbles.len() & 1;
    let flag = (if leaf { 2 } else { 0 }) + odd as u8;
    let mut out = Vec::with_capacity(1 + nibbles.len() / 2);
    out.push(if odd == 1 { (flag << 4) | nibbles[0] } else { flag << 4 });
    for p in nibbles[odd..].chunks(2) {
        out.push((p[0] << 4) | p[1]);
    }
    out
}

fn list(payload: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 3);
    Header { list: true, payload_length: payload.len() }.encode(&mut out);
    out.extend_from_slice(&payload);
    out
}

struct Build<'a, F: Fn(usize) -> Vec<u8>> {
    /// (item index, key nibbles), in key order.
    keys: &'a [(usize, Vec<u8>)],
    value: &'a F,
    cache: Option<&'a mut RootCache>,
}

impl<F: Fn(usize) -> Vec<u8>> Build<'_, F> {
    fn leaf(&self, k: usize, depth: usize) -> Vec<u8> {
        let (i, path) = &self.keys[k];
        let mut p = Vec::new();
        hex_prefix(&path[depth..], true).as_slice().encode(&mut p);
        (self.value)(*i).as_slice().encode(&mut p);
        list(p)
    }

    fn leaf_ref(&mut self, k: usize, depth: usize) -> Ref {
        let key = (self.keys[k].0 as u32, depth as u8);
        if let Some(r) = self.cache.as_ref().and_then(|c| c.leaves.get(&key)) {
            return r.clone();
        }
        let r = Ref::of(self.leaf(k, depth));
        if let Some(c) = self.cache.as_mut() {
            c.leaves.insert(key, r.clone());
        }
        r
    }

    fn node_ref(&mut self, lo: usize, hi: usize, depth: usize) -> Ref {
        let key = (depth as u8, self.keys[lo].0 as u32, self.keys[hi - 1].0 as u32, (hi - lo) as u32);
        if let Some(r) = self.cache.as_ref().and_then(|c| c.nodes.get(&key)) {
            return r.clone();
        }
        let r = Ref::of(self.node(lo, hi, depth));
        if let Some(c) = self.cache.as_mut() {
            c.nodes.insert(key, r.clone());
        }
        r
    }

    fn branch(&mut self, lo: usize, hi: usize, depth: usize) -> Vec<u8> {
        let mut slots: Vec<Option<Ref>> = vec![None; 16];
        let mut value: Option<Vec<u8>> = None;
        let mut i = lo;
        if self.keys[i].1.len() == depth {
            value = Some((self.value)(self.keys[i].0));
            i += 1;
        }
        while i < hi {
            let nibble = self.keys[i].1[depth];
            let mut j = i + 1;
            while j < hi && self.keys[j].1[depth] == nibble {
                j += 1;
            }
            slots[nibble as usize] = Some(if j - i == 1 { self.leaf_ref(i, depth + 1) } else { self.node_ref(i, j, depth + 1) });
            i = j;
        }
        let mut p = Vec::with_capacity(slots.iter().map(|s| s.as_ref().map_or(1, Ref::len)).sum::<usize>() + 40);
        for s in &slots {
            match s {
                Some(r) => r.put(&mut p),
                None => p.push(alloy_rlp::EMPTY_STRING_CODE),
            }
        }
        match value {
            Some(v) => v.as_slice().encode(&mut p),
            None => p.push(alloy_rlp::EMPTY_STRING_CODE),
        }
        list(p)
    }

    /// The node over keys [lo, hi) (more than one) at `depth`: a branch, or an extension above one.
    fn node(&mut self, lo: usize, hi: usize, depth: usize) -> Vec<u8> {
        let (a, b) = (&self.keys[lo].1, &self.keys[hi - 1].1);
        let mut shared = 0;
        while depth + shared < a.len() && depth + shared < b.len() && a[depth + shared] == b[depth + shared] {
            shared += 1;
        }
        if shared == 0 {
            return self.branch(lo, hi, depth);
        }
        let path = hex_prefix(&self.keys[lo].1[depth..depth + shared], false);
        let child = Ref::of(self.branch(lo, hi, depth + shared));
        let mut p = Vec::new();
        path.as_slice().encode(&mut p);
        child.put(&mut p);
        list(p)
    }
}

/// The keys rlp(0..count) in nibble order: rlp(1..=127) are the single bytes 0x01..0x7f, rlp(0) is 0x80, and from
/// 128 on rlp(i) is 0x81.. / 0x82.. followed by big-endian i, which sorts by i.
fn sorted_keys(count: usize) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::with_capacity(count);
    out.extend((1..count.min(128)).map(|i| (i, key_nibbles(i))));
    out.push((0, key_nibbles(0)));
    out.extend((128..count).map(|i| (i, key_nibbles(i))));
    out
}

/// The root of the trie rlp(i) → `value(i)` for i < `count` (a list's transactions or receipts root). With `cache`,
/// `value` is asked only for the items whose leaf is not in it; a cache must only ever see the same items again, with
/// more appended.
pub fn ordered_root(count: usize, value: impl Fn(usize) -> Vec<u8>, cache: Option<&mut RootCache>) -> B256 {
    if count == 0 {
        return alloy_trie::EMPTY_ROOT_HASH;
    }
    let keys = sorted_keys(count);
    let mut b = Build { keys: &keys, value: &value, cache };
    let root = if count == 1 { b.leaf(0, 0) } else { b.node(0, count, 0) };
    keccak256(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| keccak256(i.to_be_bytes()).repeat(8)[..1 + (i * 7) % 200].to_vec()).collect()
    }

    #[test]
    fn equals_alloy_trie_for_every_length_and_with_a_cache_grown_step_by_step() {
        let all = items(700);
        let mut cache = RootCache::default();
        for n in [0usize, 1, 2, 3, 15, 16, 17, 127, 128, 129, 200, 255, 256, 257, 400, 700] {
            let want = alloy_trie::root::ordered_trie_root_with_encoder(&all[..n], |v: &Vec<u8>, out: &mut Vec<u8>| out.extend_from_slice(v));
            assert_eq!(ordered_root(n, |i| all[i].clone(), None), want, "{n} items, no cache");
            assert_eq!(ordered_root(n, |i| all[i].clone(), Some(&mut cache)), want, "{n} items, cache grown to here");
        }
    }

    #[test]
    fn a_cached_build_asks_only_for_new_or_moved_leaves() {
        let all = items(400);
        let mut cache = RootCache::default();
        ordered_root(300, |i| all[i].clone(), Some(&mut cache));
        let asked = std::cell::Cell::new(0);
        ordered_root(400, |i| {
            asked.set(asked.get() + 1);
            all[i].clone()
        }, Some(&mut cache));
        assert!(asked.get() <= 100 + 40, "asked for {} items to add 100", asked.get());
    }
}
