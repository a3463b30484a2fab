/*
 * The compact form of a worker address, for names of bounded size
 * (libfabric's FI_NAME_MAX is 64 bytes, and MPI libraries keep names in
 * buffers of that size). It holds exactly what the full form holds:
 * varints for the header's id and window, a code for a known transport
 * name, one-byte lengths, and each device and iface address as a bitmap of
 * its non-zero bytes followed by those bytes (transport addresses are mostly
 * zero padding and small integers).
 *
 *   tag (kCompactTag), ifaces | flags << 4, varint id, varint window,
 *   per iface: tl code (0: a length byte and the name follow),
 *              device address length, its packed bytes,
 *              iface address length, its packed bytes
 */
#ifndef UCT_TM_PROTO_COMPACT_ADDRESS_H_
#define UCT_TM_PROTO_COMPACT_ADDRESS_H_

#include "wire.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace proto {

/* The first byte of a compact address: never the first byte of the full
 * form (kAddressMagic's low byte), and it changes with kAddressVersion. */
inline constexpr uint8_t kCompactTag = 0xc0 | kAddressVersion;
static_assert((kAddressVersion < 16) && (kCompactTag != (kAddressMagic & 0xff)),
              "a compact address is told apart by its first byte");

inline bool is_compact_address(const void *address, size_t length) {
    return (length > 0) && (*static_cast<const uint8_t *>(address) == kCompactTag);
}

/* The compact form of the full address `full` (Worker::address()'s bytes);
 * false if it has more than 15 ifaces or flags above 15, or a transport
 * address longer than 255 bytes. */
bool compact_address(const std::vector<char> &full, std::vector<uint8_t> *out);

/* The full form of a compact address; false, *out unspecified, if the bytes
 * are not one (truncated, trailing bytes, lengths beyond the input). */
bool expand_address(const uint8_t *in, size_t length, std::vector<char> *out);

}  // namespace proto
}  // namespace uct_tm

#endif
