/**
 * Reading a password for `ctl` (user create, db grant-login): from a
 * terminal, with echo off (raw mode: the characters typed are never shown,
 * not even as `*`), asked twice so a typo is caught; from a pipe or a file
 * (`< password.txt`), the whole input less one final newline. Never from an
 * argument: those land in shell histories and in `ps`.
 */
import type { ReadStream } from 'node:tty'

export class PromptAborted extends Error {
  constructor(message = 'password entry cancelled') {
    super(message)
    this.name = 'PromptAborted'
  }
}

const MAX_INPUT_BYTES = 64 * 1024

/** Reads one line from a terminal without echoing it. */
export function readHiddenLine(input: ReadStream, output: NodeJS.WritableStream, prompt: string): Promise<string> {
  return new Promise((resolve, reject) => {
    output.write(prompt)
    let line = ''
    const wasRaw = input.isRaw
    input.setRawMode(true)
    input.setEncoding('utf8')
    input.resume()
    const finish = (error?: Error): void => {
      input.setRawMode(wasRaw)
      input.pause()
      input.off('data', onData)
      output.write('\n')
      if (error === undefined) resolve(line)
      else reject(error)
    }
    const onData = (chunk: string): void => {
      for (const character of chunk) {
        if (character === '\r' || character === '\n') return finish()
        // Ctrl-C, Ctrl-D (end of input on an empty line counts as cancel too).
        if (character === '\u0003' || character === '\u0004') return finish(new PromptAborted())
        if (character === '\u007f' || character === '\b') {
          line = [...line].slice(0, -1).join('')
          continue
        }
        // Ctrl-U clears the line, as in a shell.
        if (character === '\u0015') {
          line = ''
          continue
        }
        // Other control characters (arrow keys' escape sequences, say) are ignored.
        if (character < ' ') continue
        line += character
        if (line.length > MAX_INPUT_BYTES) return finish(new PromptAborted('password entry too long'))
      }
    }
    input.on('data', onData)
  })
}

async function readAll(input: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of input) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer)
    size += buffer.length
    if (size > MAX_INPUT_BYTES) throw new PromptAborted('standard input is too long for a password')
    chunks.push(buffer)
  }
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '')
}

export interface PasswordInput {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream
}

/**
 * The password from standard input: on a terminal, typed twice with echo
 * off (`label: `, then `label again: `); otherwise read whole.
 */
export async function readPassword(label: string, io: PasswordInput = { stdin: process.stdin, stderr: process.stderr }): Promise<string> {
  if (io.stdin.isTTY !== true) return readAll(io.stdin)
  const tty = io.stdin as ReadStream
  const first = await readHiddenLine(tty, io.stderr, `${label}: `)
  const second = await readHiddenLine(tty, io.stderr, `${label} again: `)
  if (first !== second) throw new PromptAborted('the two entries differ')
  return first
}
