/** agency-service: configuration, migrations, then serve until SIGTERM. */
import { serveUntilTerminated } from '@scoped/shared/backend-server'
import { runMain } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { migrateOrWait } from '@scoped/shared/migrate'
import { createNonceRedis } from '@scoped/shared/nonce-store'
import { buildAgencyApp } from './app.js'
import { readAgencyServiceConfig } from './config.js'
import { createKeyInvalidator } from './invalidator.js'
import { KeyService } from './keys/key-service.js'

runMain('agency-service', async () => {
  const config = readAgencyServiceConfig(process.env)
  const logger = createLogger('agency-service', config.logLevel)
  // Applies pending migrations when its role owns the schema; a least-privilege role waits for the migration job.
  await migrateOrWait(config.databaseUrl, { waitMs: 60_000, onWait: (pending) => logger.info({ pending }, 'waiting for the migration job') })
  const pool = createPool(config.databaseUrl, { applicationName: 'agency-service' })
  const invalidator = createKeyInvalidator(pool, config, 'agency-service')
  const keys = new KeyService(pool, invalidator, { permissions: config.permissions })
  const nonceRedis = config.redisUrl === undefined ? undefined : createNonceRedis(config.redisUrl, config.redisKeyPrefix, 'agency-service')
  const app = await buildAgencyApp({
    pool,
    keys,
    logger,
    signingSecrets: config.signingSecrets,
    consoleDeviceSecret: config.consoleDeviceSecret,
    ...(config.tls === undefined ? {} : { https: config.tls }),
    ...(nonceRedis === undefined ? {} : { nonceRedis }),
  })
  await serveUntilTerminated(app, {
    name: 'agency-service',
    host: config.host,
    port: config.port,
    release: async () => {
      await invalidator.close()
      nonceRedis?.client.disconnect()
      await pool.end()
    },
  })
})
