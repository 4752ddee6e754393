/** agency-service configuration, read and validated once at start. */
import type { Env, LogLevel } from '@scoped/shared/config'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { readDatabaseUrl, readHost, readLogLevel, readPort, readRedisKeyPrefix, readRedisUrl } from '@scoped/shared/config'
import { readAudienceSecrets, readConsoleDeviceSecret } from '@scoped/shared/secrets'
import { readBackendTls } from '@scoped/shared/backend-server'
import type { BackendTls } from '@scoped/shared/backend-server'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
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
  /** AGENCY_SERVICE_TLS_CERT_FILE / AGENCY_SERVICE_TLS_KEY_FILE: listen with TLS; plain HTTP when unset. */
  tls: BackendTls | undefined
  logLevel: LogLevel
  /** The permission names keys may be given: those of the gateway's routes file (ROUTES_FILE, deploy/routes.yaml by default). */
  permissions: PermissionCatalog
}

export function readAgencyServiceConfig(env: Env): Readonly<AgencyServiceConfig> {
  return Object.freeze({
    host: readHost(env, 'AGENCY_SERVICE_HOST', '127.0.0.1'),
    port: readPort(env, 'AGENCY_SERVICE_PORT', 4001),
    databaseUrl: readDatabaseUrl(env).url,
    redisUrl: readRedisUrl(env),
    redisKeyPrefix: readRedisKeyPrefix(env),
    keyCacheSecret: readKeyCacheSecret(env),
    signingSecrets: readAudienceSecrets(env, AGENCY_SERVICE_AUDIENCE),
    consoleDeviceSecret: readConsoleDeviceSecret(env),
    tls: readBackendTls(env, 'AGENCY_SERVICE'),
    logLevel: readLogLevel(env),
    permissions: readPermissionCatalog(env),
  })
}
