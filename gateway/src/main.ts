/**
 * `npm run gateway`: one gateway replica, configured from the environment.
 * Logs "gateway ready" once every listener is up; on SIGTERM (or SIGINT) it
 * stops accepting, finishes in-flight requests, flushes last use, closes its
 * connections and exits 0. Whatever its clients or its stores do, it is gone
 * within GATEWAY_DRAIN_TIMEOUT_MS and STOP_MARGIN_MS more: past that it
 * exits 1 without waiting for the rest of its shutdown.
 */
import { runMain } from '@scoped/shared/config'
import { launchGateway } from './app.js'
import { BatchingDestination } from './log-destination.js'
import { readGatewayConfig } from './config.js'

/** How long after the drain deadline the shutdown may take (last use flushed, pools closed) before the process just exits. */
const STOP_MARGIN_MS = 5_000

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
    const bound = setTimeout(() => {
      log.error({ ms: config.deadlines.drain + STOP_MARGIN_MS }, 'gateway did not stop within its drain bound; exiting')
      process.exit(1)
    }, config.deadlines.drain + STOP_MARGIN_MS)
    bound.unref()
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
