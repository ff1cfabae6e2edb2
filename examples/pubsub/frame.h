// SPDX-License-Identifier: BSL-1.0
// The wire format of the pub/sub example: length-prefixed frames.
//
//   frame   = length (4 bytes, big-endian) | channel (2 bytes, big-endian) | payload
//   length  = 2 + payload size, at least 2 and at most the broker's max_frame
//
// Publishers send frames to their channel; the broker sends each subscriber the frames of the
// channels it subscribed to, unchanged. Channel 0xFFFF is the control channel: a subscriber's
// first frame there lists its channels (2 bytes each, big-endian), and the broker answers with
// an empty frame there once the subscription holds. After a subscriber has half-closed, the
// broker also sends it an empty control frame now and then while nothing else is on its way
// (to learn whether it closed: TCP tells a half-close and a close apart only by the reset that
// a closed peer answers data with); subscribers ignore them.
#ifndef ASYNC_EXAMPLES_PUBSUB_FRAME_H
#define ASYNC_EXAMPLES_PUBSUB_FRAME_H

#if defined(ASYNC_ASIO_STANDALONE)
#include <asio.hpp>
#else
#include <boost/asio.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pubsub {

// Boost.Asio, or standalone Asio with ASYNC_ASIO_STANDALONE (as async/asio.h).
#if defined(ASYNC_ASIO_STANDALONE)
namespace net = ::asio;
using error_code = ::asio::error_code;
using system_error = ::asio::system_error;
#else
namespace net = ::boost::asio;
using error_code = ::boost::system::error_code;
using system_error = ::boost::system::system_error;
#endif
using tcp = net::ip::tcp;

constexpr std::uint16_t control_channel = 0xFFFF;
constexpr std::size_t header_size = 6;

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}
inline void put_u16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
  out.push_back(static_cast<char>(v & 0xFF));
}
inline std::uint32_t get_u32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}
inline std::uint16_t get_u16(const unsigned char* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

/// The bytes of one frame.
inline std::string encode(std::uint16_t channel, const std::string& payload) {
  std::string out;
  out.reserve(header_size + payload.size());
  put_u32(out, static_cast<std::uint32_t>(payload.size() + 2));
  put_u16(out, channel);
  out += payload;
  return out;
}

/// A frame as read: its channel, its payload, and its bytes as they came (to forward as is).
struct frame {
  std::uint16_t channel = 0;
  std::string payload;
  std::string bytes;
};

enum class read_result { ok, closed, malformed, oversized };

/// Reads one frame from a blocking socket. `closed`: the peer closed (or the socket failed)
/// before a whole frame came; `malformed`: a length below 2; `oversized`: a length above
/// max_frame (nothing more is read: the caller closes the connection).
inline read_result read_frame(tcp::socket& socket, std::size_t max_frame, frame& out) {
  unsigned char header[header_size];
  error_code error;
  net::read(socket, net::buffer(header, 4), error);
  if (error) {
    return read_result::closed;
  }
  const std::uint32_t length = get_u32(header);
  if (length < 2) {
    return read_result::malformed;
  }
  if (length > max_frame) {
    return read_result::oversized;
  }
  net::read(socket, net::buffer(header + 4, 2), error);
  if (error) {
    return read_result::closed;
  }
  out.channel = get_u16(header + 4);
  out.payload.resize(length - 2);
  if (length > 2) {
    net::read(socket, net::buffer(&out.payload[0], out.payload.size()), error);
    if (error) {
      return read_result::closed;
    }
  }
  out.bytes.assign(reinterpret_cast<const char*>(header), header_size);
  out.bytes += out.payload;
  return read_result::ok;
}

/// The payload of a subscription: the channels, 2 bytes each.
inline std::string subscription(const std::vector<std::uint16_t>& channels) {
  std::string out;
  for (std::uint16_t c : channels) {
    put_u16(out, c);
  }
  return out;
}

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_FRAME_H
