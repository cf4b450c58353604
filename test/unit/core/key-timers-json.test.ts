import { timersFromJson, timersFromMetadata, timersToJson } from '../../../core/key-timers-json';

test("Cassandra's metadata: '' for no timers (kafka-flow's value), JSON with them; another writer's free text holds none", () => {
  const timers = [{ name: 'close', at: 5, time: 'event' as const }];
  expect(timersToJson(undefined)).toBe('');
  expect(timersToJson([])).toBe('');
  expect(timersToJson(timers)).toBe('{"timers":[{"name":"close","at":5,"time":"event"}]}');
  expect(timersFromMetadata(timersToJson(timers))).toEqual(timers);
  expect(timersFromMetadata('')).toBeUndefined();
  expect(timersFromMetadata(null)).toBeUndefined();
  expect(timersFromMetadata('written by kafka-flow')).toBeUndefined();
  expect(timersFromMetadata('{"other":1}')).toBeUndefined();
  expect(() => timersFromMetadata('{"timers":[{"name":"x","at":1,"time":"wall"}]}')).toThrow(/a timer is/);
  expect(() => timersFromJson({})).toThrow(/not a list/);
  expect(timersFromJson([])).toBeUndefined();
});
