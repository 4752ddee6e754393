/**
 * HMAC-SHA256 (RFC 2104) under one key for many messages: the gateway signs
 * every forwarded request with the secret of its route's audience.
 *
 * Why not `createHmac` per message: it builds a hash object and looks the
 * digest up in OpenSSL again for every message, which the gateway's CPU
 * profile showed costing more than the rest of signing together. HMAC is two hashes, H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)):
 * here the two padded key blocks are made once, each message costs two calls
 * of Node's one-shot `hash()` (which keeps the digest it looked up), and the
 * message and the inner digest are written into this object's own buffers.
 * The result is byte for byte
 * `createHmac('sha256', key)`'s (the tests compare the two over random keys
 * and messages, keys longer than a block included).
 *
 * One object is used by one thread at a time, like everything in a Node
 * process: its scratch buffers are reused by each call.
 */
import { hash, KeyObject } from 'node:crypto'
import type { BinaryLike } from 'node:crypto'

/** SHA-256 works on blocks of 64 bytes; a key longer than that is hashed first (RFC 2104 §2). */
const BLOCK = 64
const DIGEST = 32
/** UTF-8 takes at most three bytes for one UTF-16 code unit. */
const MAX_UTF8_PER_UNIT = 3

function keyBytes(key: BinaryLike | KeyObject): Buffer {
  if (key instanceof KeyObject) return key.export()
  if (typeof key === 'string') return Buffer.from(key, 'utf8')
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength)
}

export class HmacSha256 {
  /** K ⊕ ipad, then room for the message. */
  private inner: Buffer
  /** K ⊕ opad, then the inner digest. */
  private readonly outer = Buffer.alloc(BLOCK + DIGEST)

  constructor(key: BinaryLike | KeyObject) {
    let bytes = keyBytes(key)
    if (bytes.length > BLOCK) bytes = hash('sha256', bytes, 'buffer')
    this.inner = Buffer.alloc(BLOCK + 1024)
    for (let i = 0; i < BLOCK; i++) {
      const k = i < bytes.length ? bytes[i]! : 0
      this.inner[i] = k ^ 0x36
      this.outer[i] = k ^ 0x5c
    }
  }

  private outerBlock(message: string): Buffer {
    const room = BLOCK + message.length * MAX_UTF8_PER_UNIT
    if (room > this.inner.length) {
      const larger = Buffer.alloc(room)
      this.inner.copy(larger, 0, 0, BLOCK)
      this.inner = larger
    }
    const length = this.inner.write(message, BLOCK, 'utf8')
    // The inner digest comes back as a 32-character 'binary' (latin1) string, one character a byte, and is written into
    // the outer block: a Buffer result would cost a new backing store for every message (the profile showed it).
    this.outer.write(hash('sha256', this.inner.subarray(0, BLOCK + length), 'binary'), BLOCK, 'binary')
    return this.outer
  }

  /** The MAC of `message` (as UTF-8), in hex. */
  hex(message: string): string {
    return hash('sha256', this.outerBlock(message), 'hex')
  }
}
