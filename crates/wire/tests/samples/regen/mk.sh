# Regenerates tests/samples/mod.rs: captures real frames between two throwaway netns (root needed),
# then gen.py picks frames and records what tcpdump prints for exactly those bytes.
# Usage: mkdir -p /tmp/wcap && cp regen/* /tmp/wcap && cd /tmp/wcap && bash mk.sh && python3 gen.py
set -x
ip netns del wA 2>/dev/null; ip netns del wB 2>/dev/null
ip netns add wA; ip netns add wB
ip link add wa0 type veth peer name wb0
ip link set wa0 netns wA; ip link set wb0 netns wB
ip -n wA link set wa0 address 02:00:00:00:00:01
ip -n wB link set wb0 address 02:00:00:00:00:02
ip -n wA addr add 10.0.0.1/24 dev wa0; ip -n wB addr add 10.0.0.2/24 dev wb0
ip -n wA link set lo up; ip -n wB link set lo up
ip -n wA addr add 2001:db8::1/64 dev wa0 nodad; ip -n wB addr add 2001:db8::2/64 dev wb0 nodad
ip -n wA link set wa0 up; ip -n wB link set wb0 up
ip netns exec wB tcpdump -i wb0 -w /tmp/wcap/eth.pcap -U 2>/dev/null &
ip netns exec wB tcpdump -i any -y LINUX_SLL2 -w /tmp/wcap/sll2.pcap -U 2>/dev/null &
ip netns exec wB tcpdump -i any -y LINUX_SLL -w /tmp/wcap/sll.pcap -U 2>/dev/null &
sleep 1
sleep 2
ip netns exec wA python3 /tmp/wcap/ping.py 4 10.0.0.2
ip netns exec wA python3 /tmp/wcap/vlan.py
ip netns exec wA python3 -c "import socket; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('10.0.0.1',1234)); s.sendto(b'hello, ringcap wire', ('10.0.0.2',4321))"
ip netns exec wA python3 -c "
import socket
s=socket.socket(); s.bind(('10.0.0.1',40000))
try: s.connect(('10.0.0.2',8080))
except Exception as e: print(e)"
ip netns exec wB python3 -c "
import socket,threading,time
l=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1); l.bind(('10.0.0.2',9000)); l.listen()
def srv():
    c,_=l.accept(); d=c.recv(100); c.send(b'pong'); time.sleep(0.2); c.close()
t=threading.Thread(target=srv); t.start()
import subprocess
subprocess.run(['ip','netns','exec','wA','python3','-c','''
import socket,time
s=socket.create_connection((\"10.0.0.2\",9000),source_address=(\"10.0.0.1\",40001)); s.send(b\"ping\"); s.recv(10); time.sleep(0.3); s.close()'''])
t.join()"
ip netns exec wA python3 -c "import socket; s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); s.bind(('2001:db8::1',5555)); s.sendto(b'v6 payload', ('2001:db8::2',6666))"
ip netns exec wA python3 /tmp/wcap/ping.py 6 2001:db8::2
# fragmented UDP
ip netns exec wA python3 -c "import socket; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b'x'*1600, ('10.0.0.2',7777))"
ip netns exec wA python3 -c "import socket; s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); s.sendto(b'y'*1600, ('2001:db8::2',7777))"
sleep 1
kill %1 %2 %3
sleep 0.5
ip netns del wA; ip netns del wB
