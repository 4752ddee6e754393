/** agency-service configuration, read and validated once at start. */
import type { Env, LogLevel } from '@scoped/shared/config'
import { readDatabaseUrl, readHost, readLogLevel, readPort, readRedisKeyPrefix, readRedisUrl } from '@scoped/shared/config'
import { readTenantSigningSecrets } from '@scoped/shared/tenant-verifier'

export interface AgencyServiceConfig {
  host: string
  port: number
  databaseUrl: string
  /** Where gateway key caches are invalidated; unset means a single gateway without a shared cache. */
  redisUrl: string | undefined
  redisKeyPrefix: string
  /** TENANT_SIGNING_SECRET, then TENANT_SIGNING_SECRET_PREVIOUS when set. */
  signingSecrets: readonly string[]
  logLevel: LogLevel
}

export function readAgencyServiceConfig(env: Env): Readonly<AgencyServiceConfig> {
  return Object.freeze({
    host: readHost(env, 'AGENCY_SERVICE_HOST', '127.0.0.1'),
    port: readPort(env, 'AGENCY_SERVICE_PORT', 4001),
    databaseUrl: readDatabaseUrl(env).url,
    redisUrl: readRedisUrl(env),
    redisKeyPrefix: readRedisKeyPrefix(env),
    signingSecrets: readTenantSigningSecrets(env),
    logLevel: readLogLevel(env),
  })
}
