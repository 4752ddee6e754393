/**
 * A gateway replica in the test's own process, started as gateway/src/main.ts
 * starts a real one (readGatewayConfig, then launchGateway), from the same
 * environment a process would get:
 * only that environment (not this process's), and every port 0 (the kernel
 * picks a free one) unless the environment names one. Its log lines are
 * kept in memory, so `output()` answers what a process would have written to
 * stdout. `stop()` is the graceful close that SIGTERM starts in a process
 * (stops accepting, finishes in-flight requests, flushes last use, closes its
 * pools); it also runs at teardown. What only a process has (signals, exit
 * codes, a failed start's one line on stderr) is for startProcess.
 */
import type { Gateway } from '@scoped/gateway/app'
import { launchGateway } from '@scoped/gateway/app'
import type { GatewayConfig } from '@scoped/gateway/config'
import { readGatewayConfig } from '@scoped/gateway/config'
import type { ProcessEnv } from './processes.js'
import type { Teardown } from './teardown.js'

export interface InProcessGateway {
  readonly gateway: Gateway
  readonly config: GatewayConfig
  /** The bound ports: the HTTPS API, the plain-HTTP listener that refuses everything, the operations listener. */
  readonly ports: { api: number; http: number; admin: number }
  /** Every line it has logged so far (JSON, one per line), as a process's output. */
  output(): string
  /** Closes it gracefully, as SIGTERM does a process; once (later calls answer the same promise). */
  stop(): Promise<void>
}

/** A pino destination that keeps what it is given. */
class LogLines {
  private text = ''

  write(line: string): void {
    this.text += line
  }

  toString(): string {
    return this.text
  }
}

const PORTS = ['GATEWAY_PORT', 'GATEWAY_HTTP_PORT', 'GATEWAY_ADMIN_PORT']

/** Starts a replica in this process from `env` (what the process would get); stopped at teardown. */
export async function startInProcessGateway(t: Teardown, env: ProcessEnv): Promise<InProcessGateway> {
  const withPorts: ProcessEnv = { ...env }
  for (const name of PORTS) if (withPorts[name] === undefined || withPorts[name] === '') withPorts[name] = '0'
  const config = readGatewayConfig(withPorts)
  const lines = new LogLines()
  const { gateway } = await launchGateway(config, lines)
  let stopped: Promise<void> | undefined
  const stop = (): Promise<void> => (stopped ??= gateway.close())
  t.teardown(stop)
  const bound = gateway.ports()
  const ports = { api: bound.api, http: bound.plain, admin: bound.admin }
  return { gateway, config, ports, output: () => lines.toString(), stop }
}
