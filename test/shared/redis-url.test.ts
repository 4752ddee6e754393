/**
 * REDIS_URL: one server (redis://, rediss://) or a Sentinel deployment
 * (redis+sentinel://, rediss+sentinel://): what each form means, what the
 * client is built with, and the one clear line a wrong value stops a process
 * with (never echoing a password).
 */
import t from 'tap'
import { ConfigError, parseRedisSentinelUrl, readRedisUrl } from '@scoped/shared/config'
import { createRedis, sentinelOptions } from '@scoped/shared/redis'

t.test('the Sentinel form', async (t) => {
  t.same(parseRedisSentinelUrl('redis+sentinel://10.0.0.1:26380,sentinel-b,[::1]:26381/mymaster'), {
    sentinels: [
      { host: '10.0.0.1', port: 26380 },
      { host: 'sentinel-b', port: 26379 },
      { host: '::1', port: 26381 },
    ],
    masterName: 'mymaster',
    username: undefined,
    password: undefined,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
    db: 0,
    tls: false,
  })
  t.match(
    parseRedisSentinelUrl('rediss+sentinel://gateway:p%40ss%3Aword@s1:26379,s2:26379/scoped-api?sentinelPassword=s%26cret&sentinelUsername=watcher&db=2'),
    {
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
      masterName: 'scoped-api',
      username: 'gateway',
      password: 'p@ss:word',
      sentinelUsername: 'watcher',
      sentinelPassword: 's&cret',
      db: 2,
      tls: true,
    },
  )
  t.match(parseRedisSentinelUrl('redis+sentinel://:only-a-password@s1/m'), { username: undefined, password: 'only-a-password' })
  t.match(parseRedisSentinelUrl('REDIS+SENTINEL://s1/m'), { masterName: 'm', tls: false }, 'the scheme is case-insensitive')
})

t.test('what the client is built with', async (t) => {
  t.match(sentinelOptions('redis+sentinel://u:p@s1:26380,s2/mymaster?sentinelPassword=sp&db=1'), {
    sentinels: [
      { host: 's1', port: 26380 },
      { host: 's2', port: 26379 },
    ],
    name: 'mymaster',
    role: 'master',
    username: 'u',
    password: 'p',
    sentinelPassword: 'sp',
    db: 1,
  })
  const reconnectOnError = sentinelOptions('redis+sentinel://s1/m').reconnectOnError as (error: Error) => boolean
  t.equal(reconnectOnError(new Error("READONLY You can't write against a read only replica.")), true, 'a demoted primary: reconnect')
  t.equal(reconnectOnError(new Error('ERR unknown command')), false, 'any other error: not')
  t.equal(sentinelOptions('redis+sentinel://s1/m').tls, undefined, 'no TLS')
  t.match(sentinelOptions('rediss+sentinel://s1/m'), { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} }, 'TLS to the Sentinels and the data nodes')
  const sentinel = createRedis('redis+sentinel://127.0.0.1:1/mymaster', 'test')
  t.match(sentinel.options, {
    name: 'mymaster',
    enableOfflineQueue: false,
    lazyConnect: true,
    connectionName: 'test',
    sentinels: [{ host: '127.0.0.1', port: 1 }],
  })
  sentinel.disconnect()
  const single = createRedis('redis://127.0.0.1:1', 'test')
  t.equal(single.options.sentinels, null, 'a redis:// URL is one server, as before')
  single.disconnect()
})

t.test('readRedisUrl: each form, and a clear ConfigError naming REDIS_URL', async (t) => {
  t.equal(readRedisUrl({}), undefined)
  t.equal(readRedisUrl({ REDIS_URL: 'redis://user:pw@host:6379' }), 'redis://user:pw@host:6379')
  t.equal(readRedisUrl({ REDIS_URL: ' redis+sentinel://s1,s2/mymaster ' }), 'redis+sentinel://s1,s2/mymaster')
  const refused: Array<[string, RegExp]> = [
    ['http://host:6379', /^REDIS_URL: must use redis:\/\/ or rediss:\/\/ or redis\+sentinel:\/\/ or rediss\+sentinel:\/\/, got http:\/\/$/],
    ['redis+sentinel://s1:26379', /^REDIS_URL: names no master: end it with \/<master-name>/],
    ['redis+sentinel://s1:26379/', /^REDIS_URL: names no master/],
    ['redis+sentinel:///mymaster', /^REDIS_URL: names no Sentinel/],
    ['redis+sentinel://s1:99999/m', /^REDIS_URL: names a Sentinel port outside 1 to 65535/],
    ['redis+sentinel://s1:0/m', /^REDIS_URL: names a Sentinel port outside 1 to 65535/],
    ['redis+sentinel://s1,,s2/m', /^REDIS_URL: names a Sentinel that is not host\[:port\]: ""/],
    ['redis+sentinel://s_1/m', /^REDIS_URL: names a Sentinel that is not host\[:port\]/],
    ['redis+sentinel://s1/my master', /^REDIS_URL: has a master name that is not 1 to 64 letters/],
    ['redis+sentinel://s1/a/b', /^REDIS_URL: has a master name that is not/],
    ['redis+sentinel://s1/m?password=x', /^REDIS_URL: has an unknown parameter "password" \(allowed: sentinelUsername, sentinelPassword, db\)$/],
    ['redis+sentinel://s1/m?db=1&db=2', /^REDIS_URL: repeats the parameter db$/],
    ['redis+sentinel://s1/m?db=x', /^REDIS_URL: has a db parameter that is not a database number$/],
    ['redis+sentinel://u:%zzsecret@s1/m', /^REDIS_URL: has a malformed percent-escape in its credentials$/],
  ]
  for (const [value, message] of refused) {
    let caught: unknown
    try {
      readRedisUrl({ REDIS_URL: value })
    } catch (error) {
      caught = error
    }
    t.ok(caught instanceof ConfigError, `${value}: a ConfigError`)
    t.match((caught as Error | undefined)?.message, message, value)
    t.notMatch((caught as Error | undefined)?.message, /secret/, 'never the password')
  }
})
