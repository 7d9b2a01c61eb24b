// io/output_file.h — writing a file the user named, without damaging what is at that path.
//
// Every writer of a user-named path (GGUF files, logits dumps, run bundle files, the hub cache's
// refs) goes through here, by what PATH is:
//   a FIFO or a character or block device          written in place (a reader, /dev/null, a tty);
//                                                   the node itself is never replaced (a socket
//                                                   cannot be opened, and is refused)
//   a symbolic link                                 the file it points to is written, by these rules;
//                                                   the link stays
//   a directory                                     refused
//   a regular file, or nothing                      written to a new file with a unique name beside it
//                                                   (PATH.tmp.<pid>.<n>, created with O_EXCL), synced,
//                                                   then renamed over PATH: a reader sees the old file or
//                                                   the new one, never a partial one
// On any failure the temporary file is removed and std::runtime_error names PATH and the reason.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace toy {

// `fill` writes the contents to the stream and returns false when a write failed.
void write_output_file(const std::string& path, const std::function<bool(std::FILE*)>& fill);
void write_output_file(const std::string& path, std::string_view bytes);

}  // namespace toy
