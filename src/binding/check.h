// CHECK macros for invariants that JavaScript promised (argument types the JS
// layer validated). A failed CHECK is a bug in procwire, never bad input, so
// it aborts with the location rather than throwing.
#ifndef PROCWIRE_BINDING_CHECK_H_
#define PROCWIRE_BINDING_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define PROCWIRE_CHECK_FAILED(text)                                                        \
  do {                                                                                     \
    std::fprintf(stderr, "procwire: %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, text); \
    std::abort();                                                                          \
  } while (0)

#define CHECK(cond)                            \
  do {                                         \
    if (!(cond)) PROCWIRE_CHECK_FAILED(#cond); \
  } while (0)
#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_NOT_NULL(p) CHECK((p) != nullptr)

#endif  // PROCWIRE_BINDING_CHECK_H_
