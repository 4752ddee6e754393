/** agency-service: configuration, migrations, then serve until SIGTERM. */
import { serveUntilTerminated, transportOf } from '@scoped/shared/backend-server'
import { runMain } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { migrateOrWait } from '@scoped/shared/migrate'
import { createNonceRedis } from '@scoped/shared/nonce-store'
import { buildAgencyApp } from './app.js'
import { readAgencyServiceConfig } from './config.js'
import { createKeyInvalidator } from './invalidator.js'
import { KeyService } from './keys/key-service.js'
import { WebhookSender } from './webhooks/sender.js'

runMain('agency-service', async () => {
  const config = readAgencyServiceConfig(process.env)
  const logger = createLogger('agency-service', config.logLevel)
  logger.info(
    { leakedKeyAction: config.leaks.action, githubSecretScanningKeys: config.leaks.githubKeys?.size ?? 0 },
    config.leaks.githubKeys === undefined ? 'leak response: GitHub secret scanning off (no SECRET_SCANNING_KEYS_FILE)' : 'leak response ready',
  )
  // Applies pending migrations when its role owns the schema; a least-privilege role waits for the migration job.
  await migrateOrWait(config.databaseUrl, { waitMs: 60_000, onWait: (pending) => logger.info({ pending }, 'waiting for the migration job') })
  const pool = createPool(config.databaseUrl, { applicationName: 'agency-service' })
  const invalidator = createKeyInvalidator(pool, config, 'agency-service')
  const keys = new KeyService(pool, invalidator, { permissions: config.permissions })
  const nonceRedis = config.redisUrl === undefined ? undefined : createNonceRedis(config.redisUrl, config.redisKeyPrefix, 'agency-service')
  if (config.webhookAllowPrivateAddresses) {
    logger.warn('WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1: webhooks may go to http:// and to private, loopback and link-local addresses (development and tests only)')
  }
  const sender = new WebhookSender({ pool, logger, allowPrivateAddresses: config.webhookAllowPrivateAddresses })
  const app = await buildAgencyApp({
    pool,
    keys,
    logger,
    signingSecrets: config.signingSecrets,
    consoleDeviceSecret: config.consoleDeviceSecret,
    leaks: config.leaks,
    ...(config.tls === undefined ? {} : { https: config.tls }),
    ...(nonceRedis === undefined ? {} : { nonceRedis }),
    webhookPolicy: { allowPrivateAddresses: config.webhookAllowPrivateAddresses },
  })
  sender.start()
  await serveUntilTerminated(app, {
    name: 'agency-service',
    host: config.host,
    port: config.port,
    transport: transportOf(config.tls),
    ...(config.healthPort === undefined ? {} : { health: { port: config.healthPort, pool } }),
    release: async () => {
      // Deliveries in flight are recorded before the pool closes: a SIGTERM neither loses nor repeats one.
      await sender.stop()
      await invalidator.close()
      nonceRedis?.client.disconnect()
      await pool.end()
    },
  })
})
