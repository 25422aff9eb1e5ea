'use strict';
// The child side's ref counting (Node's Control in
// lib/internal/child_process.js): `process`'s channel keeps the process
// alive only while 'message' or 'disconnect' listeners exist, unless
// process.channel.ref()/unref() said otherwise.

class ChildRefControl {
  constructor(child, channel) {
    this.channel = channel;
    this.refs = 0;
    this.explicit = false;
    this.ref = channel.ref;
    this.unref = channel.unref;
    const control = this;
    channel.ref = function explicitRef() {
      control.explicit = true;
      return control.ref.call(channel);
    };
    channel.unref = function explicitUnref() {
      control.explicit = true;
      return control.unref.call(channel);
    };
    this.unref.call(channel);
    child.on('newListener', (name) => {
      if ((name === 'message' || name === 'disconnect') && ++this.refs === 1 && !this.explicit) {
        this.ref.call(channel);
      }
    });
    child.on('removeListener', (name) => {
      if ((name === 'message' || name === 'disconnect') && --this.refs === 0 && !this.explicit) {
        this.unref.call(channel);
      }
    });
  }
}

module.exports = { ChildRefControl };
