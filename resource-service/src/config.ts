/** resource-service configuration, read and validated once at start. */
import type { Env, LogLevel } from '@scoped/shared/config'
import { readDatabaseUrl, readHost, readLogLevel, readPort } from '@scoped/shared/config'
import { readTenantSigningSecrets } from '@scoped/shared/tenant-verifier'

export interface ResourceServiceConfig {
  host: string
  port: number
  databaseUrl: string
  /** TENANT_SIGNING_SECRET, then TENANT_SIGNING_SECRET_PREVIOUS when set. */
  signingSecrets: readonly string[]
  logLevel: LogLevel
}

export function readResourceServiceConfig(env: Env): Readonly<ResourceServiceConfig> {
  return Object.freeze({
    host: readHost(env, 'RESOURCE_SERVICE_HOST', '127.0.0.1'),
    port: readPort(env, 'RESOURCE_SERVICE_PORT', 4002),
    databaseUrl: readDatabaseUrl(env).url,
    signingSecrets: readTenantSigningSecrets(env),
    logLevel: readLogLevel(env),
  })
}
