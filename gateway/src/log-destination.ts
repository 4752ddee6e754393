/**
 * Where the gateway's log lines go: stdout, in writes of about 64 KiB. A line
 * per request written on its own costs a system call per request (and wakes
 * whatever reads the logs), so lines go out some two hundred at a time (a write
 * costs the kernel about as much per call as per byte at 16 KiB); sonic-boom's
 * own buffering (minLength) measures its whole pending buffer on every line.
 * Lines are gathered in an array here and handed to a synchronous sonic-boom
 * (which deals with partial writes and a full pipe) a batch at a time, every
 * 200 ms, and at exit, so nothing is lost on a clean stop or a crash that
 * reaches process exit.
 */
import pino from 'pino'
import type { DestinationStream } from 'pino'

export const LOG_BATCH_BYTES = 65_536
export const LOG_FLUSH_INTERVAL_MS = 200

export class BatchingDestination implements DestinationStream {
  private lines: string[] = []
  private pending = 0
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly target: { write(text: string): unknown; flushSync(): void } = pino.destination({ dest: 1, sync: true }),
    private readonly batchBytes = LOG_BATCH_BYTES,
    intervalMs = LOG_FLUSH_INTERVAL_MS,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs)
    this.timer.unref()
  }

  write(line: string): void {
    this.lines.push(line)
    this.pending += line.length
    if (this.pending >= this.batchBytes) this.flush()
  }

  /** Hands the gathered lines to stdout now. */
  flush(): void {
    if (this.lines.length === 0) return
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join('')
    this.lines = []
    this.pending = 0
    this.target.write(text)
  }

  /** Flushes and waits until everything is written (at exit). */
  flushSync(): void {
    this.flush()
    this.target.flushSync()
  }

  stop(): void {
    clearInterval(this.timer)
    this.flushSync()
  }
}
