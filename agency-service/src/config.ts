/** agency-service configuration, read and validated once at start. */
import type { Env, LogLevel } from '@scoped/shared/config'
import { ConfigError } from '@scoped/shared/config'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { readDatabaseUrl, readHost, readLogLevel, readPort, readRedisKeyPrefix, readRedisUrl } from '@scoped/shared/config'
import { readAudienceSecrets, readConsoleDeviceSecret } from '@scoped/shared/secrets'
import { readBackendTls, readHealthPort } from '@scoped/shared/backend-server'
import type { BackendTls } from '@scoped/shared/backend-server'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { LeakConfig } from './leaks/leak-config.js'
import { readLeakConfig } from './leaks/leak-config.js'
import type { PermissionCatalog } from './keys/permission-catalog.js'
import { readPermissionCatalog } from './keys/permission-catalog.js'

export interface AgencyServiceConfig {
  host: string
  port: number
  databaseUrl: string
  /** Where gateway key caches are invalidated, and where every replica remembers the nonces it accepted; unset means a single gateway without a shared cache, and one replica of this service. */
  redisUrl: string | undefined
  redisKeyPrefix: string
  /** Authenticates what this service writes to the Redis key cache (KEY_CACHE_SECRET, or derived from TENANT_SIGNING_SECRET). */
  keyCacheSecret: Buffer | undefined
  /**
   * This backend's own signing secrets: AGENCY_SERVICE_SIGNING_SECRET (else derived from TENANT_SIGNING_SECRET),
   * then AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS (else derived from TENANT_SIGNING_SECRET_PREVIOUS) during a rotation.
   */
  signingSecrets: readonly Buffer[]
  /** MAC secret of the console's device cookie (CONSOLE_DEVICE_SECRET, or derived). */
  consoleDeviceSecret: Buffer
  /** AGENCY_SERVICE_TLS_CERT_FILE / AGENCY_SERVICE_TLS_KEY_FILE: listen with TLS; plain HTTP when unset. With AGENCY_SERVICE_TLS_CLIENT_CA_FILE: mutual TLS. */
  tls: BackendTls | undefined
  /** AGENCY_SERVICE_HEALTH_PORT: /healthz and /readyz on a plain-HTTP listener of their own (for probes under mutual TLS). */
  healthPort: number | undefined
  logLevel: LogLevel
  /** The permission names keys may be given: those of the gateway's routes file (ROUTES_FILE, deploy/routes.yaml by default). */
  permissions: PermissionCatalog
  /** LEAKED_KEY_ACTION and SECRET_SCANNING_KEYS_FILE: what a reported leak does, and GitHub's keys (leaks/leak-config.ts). */
  leaks: LeakConfig
  /** WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1: webhooks may go to http:// and to any address (development and tests only). */
  webhookAllowPrivateAddresses: boolean
}

export const WEBHOOK_ALLOW_PRIVATE_ADDRESSES = 'WEBHOOK_ALLOW_PRIVATE_ADDRESSES'

/** `1` lifts the webhook address rule, `0` or unset keeps it; anything else stops the process rather than guess. */
export function readWebhookAllowPrivateAddresses(env: Env): boolean {
  const value = env[WEBHOOK_ALLOW_PRIVATE_ADDRESSES]?.trim() ?? ''
  if (value === '' || value === '0') return false
  if (value === '1') return true
  throw new ConfigError(WEBHOOK_ALLOW_PRIVATE_ADDRESSES, `must be 1 or 0, got ${JSON.stringify(value)}`)
}

export function readAgencyServiceConfig(env: Env): Readonly<AgencyServiceConfig> {
  const port = readPort(env, 'AGENCY_SERVICE_PORT', 4001)
  return Object.freeze({
    host: readHost(env, 'AGENCY_SERVICE_HOST', '127.0.0.1'),
    port,
    databaseUrl: readDatabaseUrl(env).url,
    redisUrl: readRedisUrl(env),
    redisKeyPrefix: readRedisKeyPrefix(env),
    keyCacheSecret: readKeyCacheSecret(env),
    signingSecrets: readAudienceSecrets(env, AGENCY_SERVICE_AUDIENCE),
    consoleDeviceSecret: readConsoleDeviceSecret(env),
    tls: readBackendTls(env, 'AGENCY_SERVICE'),
    healthPort: readHealthPort(env, 'AGENCY_SERVICE', port),
    logLevel: readLogLevel(env),
    webhookAllowPrivateAddresses: readWebhookAllowPrivateAddresses(env),
    leaks: readLeakConfig(env),
    permissions: readPermissionCatalog(env),
  })
}
