import socket, struct, sys
def csum(b):
    if len(b)%2: b+=b'\0'
    s=sum(struct.unpack('!%dH'%(len(b)//2),b)); s=(s&0xffff)+(s>>16); s=(s&0xffff)+(s>>16); return (~s)&0xffff
payload=bytes(range(0x10,0x10+56))
if sys.argv[1]=='4':
    s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_ICMP)
    ic=struct.pack('!BBHHH',8,0,0,0x1234,1)+payload
    ic=ic[:2]+struct.pack('!H',csum(ic))+ic[4:]
    s.sendto(ic,(sys.argv[2],0)); s.settimeout(1); print(len(s.recv(200)))
else:
    s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_ICMPV6)
    ic=struct.pack('!BBHHH',128,0,0,0x1234,1)+payload
    s.sendto(ic,(sys.argv[2],0)); s.settimeout(1); print(len(s.recv(200)))
