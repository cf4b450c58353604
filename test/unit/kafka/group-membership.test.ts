// Ownership generations across joins (kafka/group-membership.ts): a cooperative join of the same
// member keeps the generation a partition was first given under, for the partitions it kept and
// the ones it is revoking; anything else starts anew with the join's generation.
import { type GroupGeneration, newlyAssigned, ownershipGeneration, withHeldSince } from '../../../kafka/group-membership';

const join = (generationId: number, assignment: number[], o: { cooperative?: boolean; revoking?: number[]; memberId?: string } = {}): GroupGeneration => ({
  groupId: 'g',
  generationId,
  memberId: o.memberId ?? 'm1',
  assignment: { t: assignment },
  cooperative: o.cooperative ?? true,
  revoking: o.revoking ? { t: o.revoking } : {},
});

test('cooperative after cooperative: kept partitions keep their ownership generation, revoking ones too; new ones take the join\'s', () => {
  const first = withHeldSince(join(5, [0, 1, 2]), undefined);
  const second = withHeldSince(join(7, [0, 3], { revoking: [1, 2] }), first);
  expect(ownershipGeneration(second, 't', 0)).toBe(5);
  expect(ownershipGeneration(second, 't', 1)).toBe(5); // being revoked: its flush commits under 7
  expect(ownershipGeneration(second, 't', 3)).toBe(7);
  expect(ownershipGeneration(second, 't', 4)).toBeUndefined();
  expect(newlyAssigned(second)).toEqual({ t: [3] });
  const third = withHeldSince(join(8, [0, 3]), second);
  expect(ownershipGeneration(third, 't', 0)).toBe(5);
  expect(ownershipGeneration(third, 't', 3)).toBe(7);
  expect(ownershipGeneration(third, 't', 1)).toBeUndefined();
});

test('after an eager join (the group turning cooperative once its last eager-only member left), nothing was kept: everything is new', () => {
  const eager = withHeldSince(join(5, [0, 1], { cooperative: false }), undefined);
  const cooperative = withHeldSince(join(6, [0, 1, 2]), eager);
  expect(newlyAssigned(cooperative)).toEqual({ t: [0, 1, 2] });
  expect(ownershipGeneration(cooperative, 't', 0)).toBe(6);
});

test('a new member id (the coordinator forgot the member) keeps nothing either', () => {
  const first = withHeldSince(join(5, [0, 1]), undefined);
  const again = withHeldSince(join(9, [0, 1], { memberId: 'm2' }), first);
  expect(newlyAssigned(again)).toEqual({ t: [0, 1] });
  expect(ownershipGeneration(again, 't', 1)).toBe(9);
});
