/**
 * Secrets beyond TENANT_SIGNING_SECRET. Each is optional: when its own
 * variable is unset it is derived from TENANT_SIGNING_SECRET with
 * HKDF-SHA256 and a label of its own, so a deployment that sets only
 * TENANT_SIGNING_SECRET keeps working, and one that wants separation (a
 * backend that must not be able to sign for another backend, a revoker that
 * holds only the cache secret) sets each variable on exactly the processes
 * that need it.
 *
 * | purpose | variable | derived with label |
 * |---|---|---|
 * | tenant headers for one backend (its audience) | `<AUDIENCE>_SIGNING_SECRET`, e.g. `AGENCY_SERVICE_SIGNING_SECRET` | `tenant-signing:<audience>` |
 * | Redis key-cache entries, invalidation messages, acknowledgements | `KEY_CACHE_SECRET` | `key-cache` |
 * | the console's device cookie (agency-service) | `CONSOLE_DEVICE_SECRET` | `console-device` (from `AGENCY_SERVICE_SIGNING_SECRET` when `TENANT_SIGNING_SECRET` is unset) |
 */
import { hkdfSync } from 'node:crypto'
import type { Env } from './config.js'
import { ConfigError, readSecret } from './config.js'

const HKDF_SALT = 'scoped-api v1'

/** A 32-byte secret derived from `master` for one purpose; different labels give unrelated secrets. */
export function deriveSecret(master: string | Buffer, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', master, HKDF_SALT, label, 32))
}

/** `agency-service` → `AGENCY_SERVICE_SIGNING_SECRET`. */
export function audienceSecretVariable(audience: string): string {
  return `${audience.toUpperCase().replaceAll('-', '_')}_SIGNING_SECRET`
}

/** Names a backend may have as its signing audience: lower-case words joined by `-`. */
export const AUDIENCE_PATTERN = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/

export function isAudience(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 64 && AUDIENCE_PATTERN.test(value)
}

/**
 * The secrets that sign (first) and verify (all) the tenant headers meant for
 * one audience: `<AUDIENCE>_SIGNING_SECRET` when set, else derived from
 * TENANT_SIGNING_SECRET; during a rotation also `<AUDIENCE>_SIGNING_SECRET_PREVIOUS`,
 * or the one derived from TENANT_SIGNING_SECRET_PREVIOUS.
 */
export function readAudienceSecrets(env: Env, audience: string): readonly Buffer[] {
  if (!isAudience(audience)) throw new Error(`not an audience name: ${audience}`)
  const variable = audienceSecretVariable(audience)
  const label = `tenant-signing:${audience}`
  const own = readSecret(env, variable)
  const ownPrevious = readSecret(env, `${variable}_PREVIOUS`)
  const master = readSecret(env, 'TENANT_SIGNING_SECRET')
  const masterPrevious = readSecret(env, 'TENANT_SIGNING_SECRET_PREVIOUS')
  if (masterPrevious !== undefined && masterPrevious === master) {
    throw new ConfigError('TENANT_SIGNING_SECRET_PREVIOUS', 'must differ from TENANT_SIGNING_SECRET')
  }
  if (ownPrevious !== undefined && ownPrevious === own) throw new ConfigError(`${variable}_PREVIOUS`, `must differ from ${variable}`)
  let current: Buffer
  if (own !== undefined) current = Buffer.from(own)
  else if (master !== undefined) current = deriveSecret(master, label)
  else throw new ConfigError('TENANT_SIGNING_SECRET', `is required (or ${variable})`)
  const secrets = [current]
  if (ownPrevious !== undefined) secrets.push(Buffer.from(ownPrevious))
  else if (masterPrevious !== undefined) secrets.push(deriveSecret(masterPrevious, label))
  return Object.freeze(secrets)
}

/**
 * The secret of the Redis key cache (entries, invalidation messages and
 * acknowledgements): KEY_CACHE_SECRET, else derived from
 * TENANT_SIGNING_SECRET; undefined when neither is set (a revoker without it
 * confirms through Postgres alone).
 */
export function readKeyCacheSecret(env: Env): Buffer | undefined {
  const own = readSecret(env, 'KEY_CACHE_SECRET')
  if (own !== undefined) return Buffer.from(own)
  const master = readSecret(env, 'TENANT_SIGNING_SECRET')
  return master === undefined ? undefined : deriveSecret(master, 'key-cache')
}

/**
 * The MAC secret of the console's device cookie: CONSOLE_DEVICE_SECRET, else
 * derived from TENANT_SIGNING_SECRET, else (a backend given only its own
 * signing secret) derived from AGENCY_SERVICE_SIGNING_SECRET; the label
 * `console-device` either way. Every agency-service replica must have the
 * same one, or a browser known to one replica is a stranger to the next.
 */
export function readConsoleDeviceSecret(env: Env): Buffer {
  const own = readSecret(env, 'CONSOLE_DEVICE_SECRET')
  if (own !== undefined) return Buffer.from(own)
  const master = readSecret(env, 'TENANT_SIGNING_SECRET')
  if (master !== undefined) return deriveSecret(master, 'console-device')
  const backend = readSecret(env, audienceSecretVariable('agency-service'))
  if (backend !== undefined) return deriveSecret(backend, 'console-device')
  throw new ConfigError('TENANT_SIGNING_SECRET', 'is required (or CONSOLE_DEVICE_SECRET, or AGENCY_SERVICE_SIGNING_SECRET)')
}
