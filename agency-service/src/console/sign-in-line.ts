/**
 * The line of sign-ins waiting to check a password, per process: a password
 * check costs one scrypt (shared/passwords.ts, one at a time per process), so
 * without a line of its own a flood of strangers' guesses would queue ahead
 * of the owner. Two lanes:
 * - known devices (device-cookie.ts: a browser that signed in as this
 *   account before) always go first, up to KNOWN_DEVICE_PLACES at once;
 * - everyone else (strangers) has a small budget, STRANGER_PLACES sign-ins
 *   being checked or waiting at once; past it a stranger is refused at once
 *   (429 with Retry-After), never queued, so the line stays short whatever
 *   the flood and a known device waits for at most the one check running.
 *
 * Sign-ins are checked one at a time (`checking`): the work under a place is
 * the throttle's read, the user's row and the scrypt, and a second one
 * running would only wait for the same scrypt.
 */
export type SignInLane = 'known-device' | 'stranger'

/** Strangers' sign-ins being checked or waiting, per process: past it, 429 at once. */
export const STRANGER_PLACES = 2
/** Known devices' sign-ins being checked or waiting, per process: past it, 429 at once (a flood with stolen device cookies). */
export const KNOWN_DEVICE_PLACES = 16
/** What a refused sign-in is told to wait: about the time of the checks ahead of it. */
export const LINE_RETRY_AFTER_SECONDS = 2

export interface SignInLineOptions {
  strangerPlaces?: number
  knownDevicePlaces?: number
  checking?: number
}

/** A place in the line: `turn` resolves when the sign-in may check; `leave` must be called once it has ended (or given up). */
export interface SignInPlace {
  turn: Promise<void>
  leave(): void
}

export class SignInLine {
  private readonly places: Record<SignInLane, number>
  private readonly checking: number
  private readonly inLine: Record<SignInLane, number> = { 'known-device': 0, stranger: 0 }
  private readonly waiting: Record<SignInLane, Array<() => void>> = { 'known-device': [], stranger: [] }
  private running = 0

  constructor(options: SignInLineOptions = {}) {
    this.places = { 'known-device': options.knownDevicePlaces ?? KNOWN_DEVICE_PLACES, stranger: options.strangerPlaces ?? STRANGER_PLACES }
    this.checking = options.checking ?? 1
  }

  /** Sign-ins of `lane` being checked or waiting (for tests and metrics). */
  count(lane: SignInLane): number {
    return this.inLine[lane]
  }

  /** A place for a sign-in of `lane`, or undefined when its lane is full (refuse it at once). */
  enter(lane: SignInLane): SignInPlace | undefined {
    if (this.inLine[lane] >= this.places[lane]) return undefined
    this.inLine[lane]++
    let started = false
    let left = false
    let start = (): void => {}
    const turn = new Promise<void>((resolve) => {
      start = (): void => {
        started = true
        resolve()
      }
    })
    if (this.running < this.checking) {
      this.running++
      start()
    } else {
      this.waiting[lane].push(start)
    }
    const leave = (): void => {
      if (left) return
      left = true
      this.inLine[lane]--
      // Gone before its turn: out of the line; after it: the next one's turn.
      if (started) this.next()
      else this.waiting[lane] = this.waiting[lane].filter((waiter) => waiter !== start)
    }
    return { turn, leave }
  }

  /** A check ended: the next known device, else the next stranger, takes its turn. */
  private next(): void {
    const waiter = this.waiting['known-device'].shift() ?? this.waiting.stranger.shift()
    if (waiter === undefined) this.running--
    else waiter()
  }
}
