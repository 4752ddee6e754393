/**
 * `npm run gateway`: one gateway replica, configured from the environment.
 * Logs "gateway ready" once every listener is up; on SIGTERM (or SIGINT) it
 * stops accepting, finishes in-flight requests, flushes last use, closes its
 * connections and exits 0.
 */
import { runMain } from '@scoped/shared/config'
import { launchGateway } from './app.js'
import { BatchingDestination } from './log-destination.js'
import { readGatewayConfig } from './config.js'

runMain('gateway', async () => {
  const config = readGatewayConfig(process.env)
  const destination = new BatchingDestination()
  process.on('exit', () => destination.flushSync())
  const { gateway, log } = await launchGateway(config, destination)
  destination.flushSync()

  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'gateway stopping')
    gateway.close().then(
      () => {
        log.info('gateway stopped')
        process.exit(0)
      },
      (error: unknown) => {
        log.error({ err: error }, 'gateway did not stop cleanly')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
})
