// Seeded pseudo-random integers for the mutation tests: every run makes the same cases.

/**
 * Integers in [0, n) from glibc's LCG with `seed`, scaled from its high bits (its low bits repeat with a short period:
 * `% 16` of them is one fixed cycle, so `rand(16) === 0` held for 1,940 of 2,000 draws in one test, and `% 2`
 * alternates).
 */
export function lcg(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return Math.floor((seed / 0x80000000) * n);
  };
}
