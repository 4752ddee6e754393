/**
 * A Bloom filter over key hashes (lowercase hex SHA-256 digests): `has`
 * answers false only for a hash never added, and true for every hash added
 * and for a small share of others (false positives, about 0.05 % at 16 bits
 * per hash). It grows by layers: when the newest layer holds its capacity, a
 * layer twice its size is added, so keys created after the start never push
 * the false-positive rate past a few times that of one layer.
 *
 * Hand-written rather than taken from npm: the input is already a uniform
 * 256-bit digest, so the bit positions come straight from its words (double
 * hashing), with no hash function to run; the general-purpose libraries hash
 * every string again and bring dependencies for it. Each filter mixes a random
 * salt into the positions, so which unknown keys pass differs between
 * replicas and restarts: nobody can collect a set of keys that passes
 * everywhere.
 */
import { randomInt } from 'node:crypto'

/** Bits per hash: with the best number of probes (11), a false positive for about 1 unknown key in 2 000. */
export const BITS_PER_HASH = 16
const PROBES = Math.round(BITS_PER_HASH * Math.LN2)
/** The smallest layer, so that a small deployment's filter grows rarely. */
export const MIN_CAPACITY = 65_536
const HEX = /^[0-9a-f]{64}$/

class Layer {
  readonly words: Uint32Array
  readonly bits: number
  count = 0

  constructor(readonly capacity: number) {
    this.bits = capacity * BITS_PER_HASH
    this.words = new Uint32Array(Math.ceil(this.bits / 32))
  }

  add(h1: number, h2: number): void {
    for (let i = 0; i < PROBES; i++) {
      const bit = (h1 + i * h2) % this.bits
      this.words[bit >>> 5]! |= 1 << (bit & 31)
    }
    this.count++
  }

  has(h1: number, h2: number): boolean {
    for (let i = 0; i < PROBES; i++) {
      const bit = (h1 + i * h2) % this.bits
      if ((this.words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false
    }
    return true
  }
}

export class DigestFilter {
  private readonly layers: Layer[]
  private readonly salt1 = randomInt(2 ** 32 - 1)
  private readonly salt2 = randomInt(2 ** 32 - 1)

  /** `capacity`: how many hashes the first layer is sized for. */
  constructor(capacity = MIN_CAPACITY) {
    this.layers = [new Layer(Math.max(MIN_CAPACITY, Math.ceil(capacity)))]
  }

  /** Adds a hash; anything that is not a 64-digit lowercase hex digest is refused (it could never be looked up). */
  add(hash: string): void {
    if (!HEX.test(hash)) throw new TypeError('not a key hash')
    let layer = this.layers[this.layers.length - 1]!
    if (layer.count >= layer.capacity) {
      layer = new Layer(layer.capacity * 2)
      this.layers.push(layer)
    }
    layer.add(this.h1(hash), this.h2(hash))
  }

  /** False: never added. True: added, or a false positive. */
  has(hash: string): boolean {
    const h1 = this.h1(hash)
    const h2 = this.h2(hash)
    if (Number.isNaN(h1) || Number.isNaN(h2)) return false
    for (const layer of this.layers) if (layer.has(h1, h2)) return true
    return false
  }

  /** Hashes added (each add counts, so a hash added twice counts twice). */
  get count(): number {
    return this.layers.reduce((sum, layer) => sum + layer.count, 0)
  }

  /** The memory the bit arrays take. */
  get bytes(): number {
    return this.layers.reduce((sum, layer) => sum + layer.words.byteLength, 0)
  }

  get layerCount(): number {
    return this.layers.length
  }

  private h1(hash: string): number {
    return (parseInt(hash.slice(0, 8), 16) ^ this.salt1) >>> 0
  }

  /** Odd, never zero: the probes step through distinct positions. */
  private h2(hash: string): number {
    return ((parseInt(hash.slice(8, 16), 16) ^ this.salt2) | 1) >>> 0
  }
}
