/**
 * The "device" cookie: a browser that has signed in successfully as a user
 * carries a signed note of it, so failed sign-ins from elsewhere (a script
 * hammering the owner's email from another address) never lock that browser
 * out: its attempts are counted on their own, per (user, device)
 * (sign-in-throttle.ts).
 *
 * Value: `v1.<user id>.<device id>.<issued, unix seconds>.<MAC>`, the MAC an
 * HMAC-SHA256 under a secret of its own (CONSOLE_DEVICE_SECRET, else derived
 * from TENANT_SIGNING_SECRET with the label `console-device`) over the
 * version, the user id, the device id, the issue time and the user's email.
 * Binding the email means the cookie vouches for a browser only when it signs
 * in as the account it was issued for: a user's own device cookie gives no
 * extra guesses at anyone else's password. HttpOnly, Secure, SameSite=Strict,
 * scoped to the console; it authenticates nothing by itself (the password is
 * always checked) and holds no secret but its MAC.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { isUuid } from '@scoped/shared/db'

export const DEVICE_COOKIE = '__Secure-sak-console-device'
/** How long a browser stays known without signing in again: a new cookie is issued at every sign-in. */
export const DEVICE_MAX_AGE_SECONDS = 180 * 24 * 60 * 60

export interface Device {
  userId: string
  deviceId: string
}

const DEVICE_ID = /^[A-Za-z0-9_-]{22}$/
const ISSUED = /^[0-9]{1,12}$/
const MAC = /^[A-Za-z0-9_-]{43}$/

function mac(secret: Buffer, userId: string, deviceId: string, issued: string, email: string): Buffer {
  return createHmac('sha256', secret).update(`v1.${userId}.${deviceId}.${issued}.${email}`).digest()
}

export function newDeviceId(): string {
  return randomBytes(16).toString('base64url')
}

/** The cookie value that marks this browser as a known device of `userId` (whose email is `email`). */
export function deviceCookieValue(secret: Buffer, device: Device, email: string, now: Date): string {
  const issued = String(Math.floor(now.getTime() / 1000))
  return `v1.${device.userId}.${device.deviceId}.${issued}.${mac(secret, device.userId, device.deviceId, issued, email).toString('base64url')}`
}

/** The device the cookie names, when its MAC verifies for `email` and it is not older than its lifetime; else undefined. */
export function readDeviceCookie(secret: Buffer, value: string | undefined, email: string, now: Date): Device | undefined {
  if (value === undefined || value.length > 200) return undefined
  const [version, userId, deviceId, issued, presented, ...rest] = value.split('.')
  if (version !== 'v1' || rest.length > 0 || !isUuid(userId) || deviceId === undefined || !DEVICE_ID.test(deviceId)) return undefined
  if (issued === undefined || !ISSUED.test(issued) || presented === undefined || !MAC.test(presented)) return undefined
  const age = now.getTime() / 1000 - Number(issued)
  if (age > DEVICE_MAX_AGE_SECONDS || age < -300) return undefined
  const expected = mac(secret, userId, deviceId, issued, email)
  const actual = Buffer.from(presented, 'base64url')
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return undefined
  return { userId, deviceId }
}
