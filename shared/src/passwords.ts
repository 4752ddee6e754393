/**
 * Console passwords: the rules a new password must meet, and hashing with
 * scrypt (memory-hard, in Node's crypto) at OWASP's current parameters,
 * N = 2^17, r = 8, p = 1 (128 MiB and a few hundred milliseconds per hash).
 * Stored as `scrypt$N$r$p$salt$hash`, so a hash made at an older, weaker cost
 * still verifies and is replaced at the next successful sign-in
 * (`needsRehash`).
 *
 * Each hash holds 128 MiB outside the JavaScript heap for its duration, so a
 * process computes one at a time and lets at most MAX_WAITING wait; beyond
 * that PasswordHashBusy is thrown (the console answers 503 and asks to retry)
 * rather than letting a burst of sign-ins exhaust the container's memory.
 */
import { readFileSync } from 'node:fs'
import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto'

export interface ScryptCost {
  N: number
  r: number
  p: number
}

/** OWASP Password Storage Cheat Sheet: scrypt with N = 2^17, r = 8, p = 1. */
export const PASSWORD_COST: Readonly<ScryptCost> = Object.freeze({ N: 2 ** 17, r: 8, p: 1 })
const KEY_LENGTH = 32
const SALT_LENGTH = 16
/** Stored parameters beyond these are not believed (they would ask for gigabytes). */
const MAX_STORED = { N: 2 ** 20, r: 32, p: 16 }

/** The shortest password accepted when one is set. */
export const MIN_PASSWORD_LENGTH = 10
/** The longest password accepted, when one is set and at sign-in (the form's maxlength too): one limit for ctl and the console. */
export const MAX_PASSWORD_LENGTH = 1024

/** Hashes computed at once per process, and how many may wait for a turn. */
const CONCURRENT = 1
const MAX_WAITING = 64

export class PasswordHashBusy extends Error {
  constructor() {
    super('too many password checks are waiting; retry shortly')
    this.name = 'PasswordHashBusy'
  }
}

let running = 0
const waiting: Array<() => void> = []

async function turn<T>(work: () => Promise<T>): Promise<T> {
  if (running >= CONCURRENT) {
    if (waiting.length >= MAX_WAITING) throw new PasswordHashBusy()
    await new Promise<void>((resolve) => waiting.push(resolve))
  } else {
    running++
  }
  try {
    return await work()
  } finally {
    const next = waiting.shift()
    // The slot passes straight to the next in line; `running` stays counted for it.
    if (next !== undefined) next()
    else running--
  }
}

/** scrypt needs 128·r·(N + p + 2) bytes; Node refuses anything above `maxmem` (32 MiB by default). */
function maxmemFor(cost: ScryptCost): number {
  return 128 * cost.r * (cost.N + cost.p + 2) + 1024 * 1024
}

function scrypt(password: string, salt: Buffer, cost: ScryptCost, keyLength: number): Promise<Buffer> {
  return turn(
    () =>
      new Promise((resolve, reject) => {
        scryptCallback(password, salt, keyLength, { ...cost, maxmem: maxmemFor(cost) }, (error, key) => (error ? reject(error) : resolve(key)))
      }),
  )
}

interface StoredHash {
  cost: ScryptCost
  salt: Buffer
  hash: Buffer
}

function parseStored(stored: string): StoredHash | undefined {
  const [kind, n, r, p, salt, hash, ...rest] = stored.split('$')
  if (kind !== 'scrypt' || rest.length > 0 || salt === undefined || hash === undefined) return undefined
  const cost = { N: Number(n), r: Number(r), p: Number(p) }
  const whole = (value: number, max: number): boolean => Number.isInteger(value) && value >= 1 && value <= max
  if (!whole(cost.N, MAX_STORED.N) || (cost.N & (cost.N - 1)) !== 0 || cost.N < 2 || !whole(cost.r, MAX_STORED.r) || !whole(cost.p, MAX_STORED.p))
    return undefined
  const saltBytes = Buffer.from(salt, 'base64')
  const hashBytes = Buffer.from(hash, 'base64')
  if (saltBytes.length === 0 || hashBytes.length < 16 || hashBytes.length > 64) return undefined
  return { cost, salt: saltBytes, hash: hashBytes }
}

/** A new hash at the current cost (or `cost`, for tests of rehashing). */
export async function hashPassword(password: string, cost: ScryptCost = PASSWORD_COST): Promise<string> {
  const salt = randomBytes(SALT_LENGTH)
  const hash = await scrypt(password, salt, cost, KEY_LENGTH)
  return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64'), hash.toString('base64')].join('$')
}

/**
 * A stored hash at today's cost that no password matches (random bytes where the hash would be): verifying against it
 * costs exactly what verifying a real one does, for a sign-in whose email is unknown.
 */
export function unmatchableHash(): string {
  return [
    'scrypt',
    PASSWORD_COST.N,
    PASSWORD_COST.r,
    PASSWORD_COST.p,
    randomBytes(SALT_LENGTH).toString('base64'),
    randomBytes(KEY_LENGTH).toString('base64'),
  ].join('$')
}

/** Whether `password` matches the stored hash (false for a malformed one); costs one scrypt at the stored parameters. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseStored(stored)
  if (parsed === undefined || password.length === 0 || password.length > MAX_PASSWORD_LENGTH) return false
  const actual = await scrypt(password, parsed.salt, parsed.cost, parsed.hash.length)
  return timingSafeEqual(actual, parsed.hash)
}

/** Whether a stored hash was made with weaker parameters than today's (or is malformed): replace it at the next sign-in. */
export function needsRehash(stored: string): boolean {
  const parsed = parseStored(stored)
  if (parsed === undefined) return true
  return (
    parsed.cost.N < PASSWORD_COST.N ||
    parsed.cost.r < PASSWORD_COST.r ||
    parsed.cost.p < PASSWORD_COST.p ||
    parsed.salt.length < SALT_LENGTH ||
    parsed.hash.length < KEY_LENGTH
  )
}

let commonPasswords: ReadonlySet<string> | undefined

/** The bundled list (shared/data/common-passwords.txt, see its README), loaded once. */
function commonList(): ReadonlySet<string> {
  if (commonPasswords === undefined) {
    const text = readFileSync(new URL('../data/common-passwords.txt', import.meta.url), 'utf8')
    commonPasswords = new Set(text.split('\n').filter((line) => line !== ''))
  }
  return commonPasswords
}

/** Whether the password is on the bundled list of common passwords (case ignored). */
export function isCommonPassword(password: string): boolean {
  return commonList().has(password.toLowerCase())
}

/** Why a new password is refused, as a sentence for the operator or user; undefined when it is acceptable. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `password must be at least ${MIN_PASSWORD_LENGTH} characters`
  if (password.length > MAX_PASSWORD_LENGTH) return `password must be at most ${MAX_PASSWORD_LENGTH} characters`
  if (isCommonPassword(password)) return 'password is one of the most common passwords (it would be guessed first): choose another'
  return undefined
}
